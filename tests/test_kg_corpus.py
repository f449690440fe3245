"""LL144 targets on the real corpus (skipped when ../shared/data/corpus is absent): every § 20-870 /
§ 5-300 defined term is an entity with its definition attached, and every cross-reference in the
text is an edge. The expected lists were written by reading the two documents, not by the extractor."""
from __future__ import annotations

import math
import os
from pathlib import Path

import pytest

from core.ingest.chunker import chunk_document
from core.ingest.loaders import load_document
from core.kg.graph import build_graph
from core.kg.normalize import entity_key
from core.kg.offline import OfflineExtractor

CORPUS = Path(os.environ.get("HYPA_CORPUS_MIRROR", Path(__file__).resolve().parents[2] / "shared" / "data" / "corpus"))
FILES = [CORPUS / "ll144" / "LL144_Definitions.pdf", CORPUS / "ll144" / "LL144_rules.pdf"]

TERMS_20_870 = ["automated employment decision tool", "bias audit", "employment decision"]
TERMS_5_300 = [
    "automated employment decision tool", "bias audit", "candidate for employment", "category", "code",
    "distribution date", "employment decision", "employment agency", "historical data", "independent auditor",
    "impact ratio", "machine learning, statistical modeling, data analytics, or artificial intelligence",
    "scoring rate", "screen", "selection rate", "simplified output", "test data",
]
# (provision the reference is written in, provision it refers to)
CROSS_REFERENCES = [
    ("§ 20-870", "42 U.S.C. § 2000e-8(c)"), ("§ 20-870", "29 CFR § 1602.7"),
    ("§ 20-872(b)", "§ 20-871(a)"),
    ("§ 20-872(b)", "§ 20-871(b)(1)"), ("§ 20-872(b)", "§ 20-871(b)(2)"), ("§ 20-872(b)", "§ 20-871(b)(3)"),
    ("§ 20-874", "Admin. Code title 8"),
    ("§ 5-300", "§ 20-870"), ("§ 5-300", "§ 5-249"), ("§ 5-300", "42 U.S.C. § 2000e-8(c)"), ("§ 5-300", "29 CFR § 1602.7"),
    ("§ 5-301(b)", "§ 5-301(b)(1)"), ("§ 5-301(b)", "§ 5-301(b)(2)"), ("§ 5-301(b)", "§ 5-301(b)(3)"),
    ("§ 5-301(c)", "§ 5-301(c)(1)"), ("§ 5-301(c)", "§ 5-301(c)(2)"), ("§ 5-301(c)", "§ 5-301(c)(3)"),
    ("§ 5-301(d)", "§ 5-301(b)(2)"), ("§ 5-301(d)", "§ 5-301(b)(3)"),
    ("§ 5-301(d)", "§ 5-301(c)(3)"), ("§ 5-301(d)", "§ 5-301(c)(4)"),
    ("§ 5-302(a)", "§ 5-301"), ("§ 5-302(b)", "§ 5-302(a)"), ("§ 5-303(b)", "§ 5-303(a)"),
    ("§ 5-304(a)", "§ 20-871(b)(1)"), ("§ 5-304(b)", "§ 20-871(b)(1)"), ("§ 5-304(b)", "§ 20-871(b)(2)"),
    ("§ 5-304(c)", "§ 20-871(b)(1)"), ("§ 5-304(c)", "§ 20-871(b)(2)"), ("§ 5-304(d)", "§ 20-871(b)(3)"),
    ("unit:DCWP Notice of Adoption", "NYC Charter § 1043"), ("unit:DCWP Notice of Adoption", "NYC Charter § 2203(f)"),
    ("unit:DCWP Notice of Adoption", "§ 20-104(b)"),
    ("unit:DCWP Notice of Adoption (Statement of Basis and Purpose)", "29 CFR § 1607.4"),
    ("Int. No. 1894-A § 1", "Admin. Code title 20 chapter 5"), ("DCWP Notice of Adoption § 1", "6 RCNY chapter 5"),
]


@pytest.fixture(scope="module")
def graph_data():
    if not all(f.is_file() for f in FILES):
        pytest.skip(f"LL144 corpus not found under {CORPUS}")
    chunks = []
    for f in FILES:
        chunks += chunk_document(
            load_document(f), collection="ll144", doc_id=f.stem.lower(), chunk_tokens=512, chunk_overlap=200,
            count_tokens=lambda t: math.ceil(len(t.split()) * 1.3),
        )
    data = OfflineExtractor().extract("ll144", chunks, {})
    return data, build_graph(data)


@pytest.mark.corpus
@pytest.mark.parametrize("section, terms", [("§ 20-870", TERMS_20_870), ("§ 5-300", TERMS_5_300)])
def test_every_defined_term_is_an_entity_with_its_definition(graph_data, section, terms):
    data, graph = graph_data
    for term in terms:
        entity = data.entities.get(entity_key(term))
        assert entity is not None and entity.kind == "term", term
        texts = [d.text for d in entity.definitions if d.label.endswith(section)]
        assert texts and all(len(t) > 10 for t in texts), f"{term}: no definition from {section}"
        assert graph.nodes[entity.key]["definitions"]


@pytest.mark.corpus
def test_aedt_abbreviation_resolves_to_the_defined_term(graph_data):
    data, _ = graph_data
    assert "AEDT" in data.entities["automated employment decision tool"].aliases


@pytest.mark.corpus
def test_every_cross_reference_is_an_edge(graph_data):
    _, graph = graph_data
    missing = [(a, b) for a, b in CROSS_REFERENCES if not (a in graph and graph.has_edge(a, b))]
    assert not missing
