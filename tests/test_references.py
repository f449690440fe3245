"""Titles of cited units indexed with a chunk (core/ingest/references.py)."""
from __future__ import annotations

from core.ingest.references import chapter_titles, unit_titles, with_cited_titles, with_references
from hypa_testkit.toy import make_chunk

TEXT = "CHAPTER II\nPROHIBITED AI PRACTICES\nArticle 5\n...\nCHAPTER V\nGENERAL-PURPOSE AI MODELS\nArticle 51\n"


def test_chapter_titles_from_capitalised_headings():
    assert chapter_titles(TEXT) == {"II": "Prohibited ai practices", "V": "General-purpose ai models"}


def test_a_chunk_gets_the_titles_of_what_it_cites_but_not_its_own():
    chunks = [
        make_chunk("EU AI Act Art. 50(1)", "Providers shall inform people.", heading="Transparency obligations"),
        make_chunk(
            "EU AI Act Art. 99(4)", "Fines for breaches of Article 50 and Article 99; see Article 7.", heading="Penalties"
        ),
        make_chunk("EU AI Act Art. 113(a)–(b)", "(a) Chapters I and II shall apply from six months.", heading="Entry into force"),
        make_chunk("Admin. Code § 20-872(a)", "violates section 20-871 of this subchapter", heading="Penalties."),
        make_chunk("Admin. Code § 20-871(a)", "An employer may not use an AEDT unless audited.", heading="Requirements."),
    ]
    articles, sections = unit_titles(chunks)
    assert articles["50"] == "Transparency obligations" and sections["20-871"] == "Requirements"
    out = with_references(chunks, TEXT)
    assert out[1].references == "Article 50: Transparency obligations"  # not itself, not the unknown Article 7
    assert out[2].references == "Chapter II: Prohibited ai practices"  # Chapter I has no title in TEXT
    assert out[3].references == "§ 20-871: Requirements"
    assert out[0].references == "" and out[0] is chunks[0]
    assert "Article 50: Transparency obligations" in out[1].search_view()


def test_each_segment_is_searched_with_the_titles_of_what_it_cites():
    """The ranker embeds "(a) Chapters I and II shall apply from …" with Chapter II's title, so "when do
    the prohibited AI practices rules apply?" finds it; the quoted sentence stays as the law has it."""
    from core.segments import chunk_segments, search_segments, unit_texts

    references = "Chapter I: General provisions; Chapter II: Prohibited ai practices; Article 78: Confidentiality"
    assert with_cited_titles("(a) Chapters I and II shall apply from six months;", references) == (
        "(a) Chapters I and II shall apply from six months; "
        "(Chapter I: General provisions; Chapter II: Prohibited ai practices)")
    assert with_cited_titles("(c) Article 78 applies.", references) == "(c) Article 78 applies. (Article 78: Confidentiality)"
    assert with_cited_titles("It applies to all.", references) == "It applies to all."  # cites nothing
    assert with_cited_titles("See Article 7.", references) == "See Article 7."  # a unit without a known title
    chunk = with_references(
        [make_chunk("EU AI Act Art. 113(a)–(b)", "(a) Chapters II shall apply from six months. (b) The rest later.",
                    heading="Entry into force")], TEXT)[0]
    assert search_segments(chunk) == [
        "(a) Chapters II shall apply from six months. (Chapter II: Prohibited ai practices)", "(b) The rest later."]
    assert chunk_segments(chunk) == ["(a) Chapters II shall apply from six months.", "(b) The rest later."]
    assert set(search_segments(chunk)) | set(chunk_segments(chunk)) <= set(unit_texts([chunk]))  # stored at ingest

