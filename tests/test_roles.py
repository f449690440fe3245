"""Chunk roles (core/roles.py): decided at ingest from the unit's label and heading, stored by both backends."""
from __future__ import annotations

import pytest

from core.ingest.chunker import chunk_document
from core.ingest.loaders import load_document
from core.roles import chunk_role, role_of
from hypa_testkit.toy import make_chunk


@pytest.mark.parametrize(
    ("label", "heading", "role"),
    [
        ("EU AI Act Recital 12", "", "recital"),
        ("EU AI Act preamble", "", "recital"),
        ("DCWP Notice of Adoption (Statement of Basis and Purpose)", "Statement of Basis and Purpose", "commentary"),
        ("DCWP Notice of Adoption", "Notice of Adoption of Final Rule", "commentary"),
        ("DCWP Notice of Adoption § 1", "", "operative"),  # a section of the notice is text of the rule
        ("6 RCNY § 5-302(b), Example 2", "Data Requirements — Example 2", "example"),
        ("6 RCNY § 5-300", "Definitions — Selection Rate", "definition"),
        ("EU AI Act Art. 3(4)", "Definitions", "definition"),
        ("EU AI Act Art. 99(3)", "Penalties", "operative"),
        ("EU AI Act Annex III(4)", "High-risk AI systems referred to in Article 6(2)", "operative"),
        ("Admin. Code § 20-872(a)", "Penalties.", "operative"),
        ("Int. No. 1894-A", "", "front"),
    ],
)
def test_role_from_label_and_heading(label: str, heading: str, role: str):
    assert chunk_role(label, heading) == role


def test_a_stored_role_wins_and_a_missing_one_is_derived():
    stored = make_chunk("EU AI Act Art. 5(1)", "x")
    assert role_of(stored) == "operative"
    old = make_chunk("EU AI Act Recital 3", "x")  # stored before roles existed: role == ""
    assert old.role == "" and role_of(old) == "recital"


def test_the_chunker_sets_every_role(tmp_path):
    text = (
        "# Widget Rules\n\n## § 1 Definitions.\nThe term “widget” means a small device sold to the public.\n\n"
        "## § 2 Notice.\nA seller shall notify each buyer ten business days before selling a widget.\n"
        "Example: A seller who plans to sell on May 20 gives notice by May 6.\n"
    )
    path = tmp_path / "widgets.md"
    path.write_text(text, encoding="utf-8")
    doc = load_document(path)
    chunks = chunk_document(doc, collection="c", doc_id="d", chunk_tokens=200, chunk_overlap=0,
                            count_tokens=lambda t: len(t.split()))
    assert chunks and all(c.role for c in chunks)
    assert all(c.role == chunk_role(c.label, c.heading) for c in chunks)
