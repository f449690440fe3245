"""hypa as a LangChain retriever (adapters/langchain.py), used in a small LCEL chain."""
from __future__ import annotations

import pytest
from langchain_core.documents import Document
from langchain_core.runnables import RunnableLambda

from adapters.langchain import HypaRetriever
from hypa_testkit.toy import toy_pipeline


def test_the_retriever_returns_cited_documents(tmp_path):
    retriever = HypaRetriever(pipeline=toy_pipeline(tmp_path), collection="toy")
    docs = retriever.invoke("How many business days before selling must a seller notify buyers?")
    assert docs and all(isinstance(d, Document) for d in docs)
    first = docs[0].metadata
    assert set(first) >= {"citation", "chunk_id", "document", "kind", "score"}
    assert any(d.metadata["citation"] == "Toy Code § 1-102(a)" for d in docs)
    assert all(d.metadata["kind"] == "chunk" and d.page_content for d in docs)


def test_the_retriever_in_an_lcel_chain(tmp_path):
    retriever = HypaRetriever(pipeline=toy_pipeline(tmp_path), collection="toy")
    cite = RunnableLambda(lambda docs: "; ".join(d.metadata["citation"] for d in docs))
    chain = retriever | cite
    assert "Toy Code § 1-103" in chain.invoke("What is the civil penalty for a first violation?")
    assert len(chain.batch(["What is a widget audit?", "How can notice be given?"])) == 2


def test_an_empty_question_is_a_clear_error(tmp_path):
    retriever = HypaRetriever(pipeline=toy_pipeline(tmp_path), collection="toy")
    with pytest.raises(ValueError, match="Please ask a question"):
        retriever.invoke("   ")
