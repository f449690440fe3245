"""hypa as a LangChain retriever: the same retrieval the bots use, for LangChain apps.

`HypaRetriever` is a `langchain_core` `BaseRetriever`: `invoke(question)` runs hypa's retrieval for a
collection — follow-up-free question reading (spelling, abbreviations, focus pieces), the parameter
policy, the learned provision ranking or the hybrid search of a named config, the knowledge graph
when the config has it — and returns one `Document` per context: a provision's text with its
citation in the metadata, or a knowledge-graph fact (kind "kg"). Nothing LangChain-specific runs in
the bots; this module is only imported by apps that use it.

    from adapters.langchain import HypaRetriever
    from bot.settings import Settings
    from bot.wiring import Components

    retriever = HypaRetriever(pipeline=Components(Settings()).pipeline, collection="ll144")
    docs = retriever.invoke("Do we need a bias audit before using a hiring tool?")

(langchain-community's NetworkX graph wrapper is not offered for the knowledge graph: that package is
being sunset and warns on import; `core/kg/graph.py` builds a plain `networkx.MultiDiGraph`.)
"""
from __future__ import annotations

from typing import Any, Protocol, Sequence

from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict

from core.types import ScoredChunk, Turn


class Retrieval(Protocol):
    """What the retriever needs from the answer pipeline (core.pipeline.AnswerPipeline fits)."""

    def retrieve(self, question: str, history: Sequence[Turn] = (), *, collection: str | None = None) -> Any: ...


def to_document(context: ScoredChunk) -> Document:
    chunk = context.chunk
    return Document(
        page_content=chunk.text,
        metadata={
            "citation": chunk.label,
            "chunk_id": chunk.id,
            "document": chunk.doc_id,
            "title": chunk.doc_title,
            "heading": chunk.heading,
            "kind": context.kind,
            "score": context.score,
            "pages": [chunk.page_start, chunk.page_end],
        },
    )


class HypaRetriever(BaseRetriever):
    """hypa's retrieval for one collection (None: the pipeline's default collection)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    pipeline: Any  # a Retrieval (core.pipeline.AnswerPipeline)
    collection: str | None = None

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        found = self.pipeline.retrieve(query, collection=self.collection)
        return [to_document(context) for context in found.contexts]
