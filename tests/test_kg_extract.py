"""Offline triplet extraction: names, abbreviations, cross-references and the facts legal text states."""
from __future__ import annotations

import pytest

from core.kg import model as m
from core.kg.normalize import entity_key, find_abbreviations, singular
from core.kg.offline import OfflineExtractor
from core.kg.provisions import find_references, label_provisions, lineage
from hypa_testkit.toy import TOY_CHUNKS, make_chunk


def test_entity_keys_ignore_case_plurals_and_quotes():
    assert entity_key("Automated Employment Decision Tools") == entity_key("“automated employment decision tool”")
    assert entity_key("Employment Agencies") == "employment agency"
    assert [singular(w) for w in ("bias", "analytics", "process", "categories", "audits", "data")] == [
        "bias", "analytics", "process", "category", "audit", "data",
    ]


def test_abbreviations_come_from_the_text_and_must_match_initials():
    text = (
        "The Department of Consumer and Worker Protection (“DCWP” or “Department”) adds rules on automated "
        "employment decision tools (“AEDT”). Reports go to the U.S. Equal Employment Opportunity Commission "
        "(“EEOC”). A widget maker (“WM”) ... Another thing (“XYZ”)."
    )
    aliases = find_abbreviations(text).to_canonical
    assert aliases["aedt"] == "automated employment decision tool"
    assert aliases["dcwp"] == aliases["department"] == "department of consumer and worker protection"
    assert aliases["eeoc"] == "equal employment opportunity commission"
    assert aliases["wm"] == "widget maker"
    assert "xyz" not in aliases  # initials do not match: not an abbreviation of "Another thing"
    defined = find_abbreviations('"Automated employment decision tool" or "AEDT" means a tool.').to_canonical
    assert defined == {"aedt": "automated employment decision tool"}


@pytest.mark.parametrize(
    "text, here, expected",
    [
        ("as defined by § 20-870 of the Code", "§ 5-300", [("§ 20-870", "defined by")]),
        ("pursuant to section 5-301 of this Chapter", "§ 5-302(a)", [("§ 5-301", "pursuant to")]),
        ("a violation of subdivision a of section 20-871", "§ 20-872(b)", [("§ 20-871(a)", "refers to")]),
        (
            "paragraphs 1, 2 or 3 of subdivision b of section 20-871",
            "§ 20-872(c)",
            [("§ 20-871(b)(1)", "refers to"), ("§ 20-871(b)(2)", "refers to"), ("§ 20-871(b)(3)", "refers to")],
        ),
        (
            "To comply with § 20-871(b)(1) and (2) of the Code",
            None,
            [("§ 20-871(b)(1)", "to comply with"), ("§ 20-871(b)(2)", "to comply with")],
        ),
        ("Notwithstanding subdivision (a) of this section", "§ 5-302(b)", [("§ 5-302(a)", "notwithstanding")]),
        (
            "paragraphs (1) and (2) of this subdivision",
            "§ 5-301(b)",
            [("§ 5-301(b)(1)", "refers to"), ("§ 5-301(b)(2)", "refers to")],
        ),
        (
            "subsection (c) of section 2000e-8 of title 42 of the United States code",
            None,
            [("42 U.S.C. § 2000e-8(c)", "refers to")],
        ),
        (
            "Sections 1043 and 2203(f) of the New York City Charter",
            None,
            [("NYC Charter § 1043", "refers to"), ("NYC Charter § 2203(f)", "refers to")],
        ),
        ("obligations under Article 26(1) and Annex III", None, [("Art. 26(1)", "under"), ("Annex III", "refers to")]),
        ("§ 20-871 Requirements. a. In the city", "§ 20-871(a)", []),  # its own heading
        ("no less than 10 business days; Section 1. This law", None, []),  # a bare "Section 1." is a heading
    ],
)
def test_cross_references(text, here, expected):
    assert [(r.key, r.how) for r in find_references(text, here)] == expected


def test_label_provisions_and_lineage():
    assert label_provisions("Admin. Code § 20-872(b)–(c)") == ["§ 20-872(b)", "§ 20-872(c)"]
    assert label_provisions("6 RCNY § 5-301(d), Example") == ["§ 5-301(d)"]
    assert label_provisions("EU AI Act Art. 3(1)–(3)") == ["Art. 3(1)", "Art. 3(2)", "Art. 3(3)"]
    assert label_provisions("Int. No. 1894-A § 2") == ["Int. No. 1894-A § 2"]  # bare numbers keep their document
    assert label_provisions("DCWP Notice of Adoption") == []
    assert lineage("§ 20-871(b)(1)") == ["§ 20-871(b)(1)", "§ 20-871(b)", "§ 20-871"]


def _facts(data):
    return {(t.subject, t.predicate, t.object) for t in data.triplets}


def test_offline_extraction_of_the_toy_regulation():
    data = OfflineExtractor().extract("toy", TOY_CHUNKS, {"toy-doc": "h"})
    facts = _facts(data)
    # definitions, attached to the term entity with provenance
    audit = data.entities["widget audit"]
    assert audit.kind == "term"
    assert audit.definitions[0].text.startswith("an impartial evaluation by an independent reviewer")
    assert audit.definitions[0].label == "Toy Code § 1-101"
    assert ("widget audit", m.MEANS, "an impartial evaluation by an independent reviewer of a widget") in facts
    assert ("widget audit", m.USES_TERM, "reviewer") in facts  # the definition uses another defined term
    # obligation, permission, deadline
    assert ("seller", m.MUST, "notify each buyer no less than ten business days before selling a widget") in facts
    assert ("seller", m.DEADLINE, "no less than ten business days before selling a widget") in facts
    assert ("notice", m.MAY, "be given by mail or e-mail") in facts
    # penalty with its amounts
    penalty = [t for t in data.triplets if t.predicate == m.PENALTY]
    assert penalty and penalty[0].subject == "seller" and "$1,500" in penalty[0].object
    # hierarchy: subsection -> section -> document
    assert ("§ 1-102(a)", m.PART_OF, "§ 1-102") in facts
    assert ("§ 1-102", m.PART_OF, "doc:toy-doc") in facts
    # provenance on every triplet
    by_id = {c.id: c for c in TOY_CHUNKS}
    assert all(by_id[t.chunk_id].label == t.label for t in data.triplets)


def test_obligations_prohibitions_conditions_and_cross_references():
    chunks = [
        make_chunk(
            "Code § 9-100",
            "§ 9-100 Definitions. Gadget inspection tool. The term “gadget inspection tool” means any process "
            "that scores gadgets. The term “gadget inspection tool” does not include a calculator. "
            "Inspector. “Inspector” means an independent person.",
        ),
        make_chunk(
            "Code § 9-101(a)",
            "(a) In the city, it shall be unlawful for a seller or a reseller to use a gadget inspection tool unless "
            "such tool has been inspected. An inspector may not own shares in the seller. "
            "A report of the inspection must be kept for at least 6 months after its latest use. "
            "The notice required by § 9-102(b)(1) of the Code must include instructions.",
        ),
        make_chunk(
            "Code § 9-102(b)",
            "(b) Inspection Notice. Where a gadget inspection tool (“GIT”) is used, a seller shall post a notice.",
        ),
    ]
    data = OfflineExtractor().extract("c", chunks, {})
    facts = _facts(data)
    assert data.entities["gadget inspection tool"].aliases == ["GIT"]
    assert ("gadget inspection tool", m.EXCLUDES, "a calculator") in facts
    assert ("seller", m.MUST_NOT, "use a gadget inspection tool unless such tool has been inspected") in facts
    assert ("reseller", m.MUST_NOT, "use a gadget inspection tool unless such tool has been inspected") in facts
    assert ("seller", m.CONDITION, "unless such tool has been inspected") in facts
    assert ("inspector", m.MUST_NOT, "own shares in the seller") in facts
    assert ("report", m.DEADLINE, "at least 6 months after its latest use") in facts
    assert ("§ 9-101(a)", "required by", "§ 9-102(b)(1)") in facts
    assert ("§ 9-102(b)(1)", m.PART_OF, "§ 9-102(b)") not in facts  # referenced-only provisions: nodes, no chunk edge needed
    assert "§ 9-102(b)(1)" in data.entities and data.entities["§ 9-102(b)(1)"].kind == "provision"
    assert ("seller", m.CONDITION, "Where a gadget inspection tool (\"GIT\") is used") in facts
    assert ("§ 9-101(a)", m.USES_TERM, "gadget inspection tool") in facts
    assert ("§ 9-101(a)", m.USES_TERM, "inspector") in facts


def test_extraction_is_deterministic_and_survives_odd_text():
    odd = [make_chunk("p. 1", ""), make_chunk("p. 2", "“” means . shall must may § (((( $"), *TOY_CHUNKS]
    a = OfflineExtractor().extract("t", odd, {})
    b = OfflineExtractor().extract("t", odd, {})
    assert a == b


def test_every_stated_fact_is_in_the_chunk_it_cites():
    """Provenance: a fact's chunk id and label name the provision whose text states it (a fact
    attributed to a neighbouring provision would be a wrong citation)."""
    import re

    from core.kg.offline import _clean

    chunks = [
        *TOY_CHUNKS,
        make_chunk("Code § 9-101(a)", "(a) A seller shall keep records for at least 6 months. An inspector may not own shares."),
        make_chunk("Code § 9-101(b)", "(b) A reseller must post a notice within 10 days after a sale, or pay $500."),
    ]
    data = OfflineExtractor().extract("c", chunks, {})
    by_id = {c.id: c for c in chunks}

    def norm(text):
        return re.sub(r"\W+", " ", text).lower().strip()

    stated = [t for t in data.triplets if not t.object_is_entity and t.predicate not in (*m.STRUCTURAL, m.TITLED)]
    assert len(stated) >= 10
    for t in stated:
        chunk = by_id[t.chunk_id]
        assert t.label == chunk.label
        assert norm(t.object.rstrip(" …")) in norm(_clean(chunk.text)), (t, chunk.label)
    for entity in data.entities.values():
        for d in entity.definitions:
            assert d.label == by_id[d.chunk_id].label and norm(d.text) in norm(_clean(by_id[d.chunk_id].text))
