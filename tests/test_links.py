"""Links to the law (core/links.py): URL patterns filled from citation labels, the manifest's patterns
for the EU AI Act and LL144, and answers whose citations carry the address."""
from __future__ import annotations

import re

import pytest

from bot.corpus import load_manifest, manifest_links
from core.errors import LinkPatternError
from core.ingestion import doc_id_for
from core.links import (
    CitationLinks,
    DocumentLinks,
    LinkingGenerator,
    LinkRule,
    check_pattern,
    label_values,
)
from core.types import Answer, Citation
from hypa_testkit.toy import TOY_CHUNKS, scored, toy_generator

EUR_LEX = "https://eur-lex.europa.eu/eli/reg/2024/1689/oj"


@pytest.mark.parametrize(
    ("label", "values"),
    [
        ("EU AI Act Art. 99(3)", {"article": "99"}),
        ("EU AI Act Art. 2(5)–(6)", {"article": "2"}),
        ("EU AI Act Art. 5(1)(a)", {"article": "5"}),
        ("EU AI Act Recital 12", {"recital": "12"}),
        ("EU AI Act Annex III(1)", {"annex": "III"}),
        ("EU AI Act Annex VIII, Section A(1)–(2)", {"annex": "VIII"}),
        ("6 RCNY § 5-301(b), Example 1", {"section": "5-301"}),
        ("Admin. Code § 20-871(a)", {"section": "20-871"}),
        ("Int. No. 1894-A § 1", {"section": "1"}),
        ("Handbook § 4.2.", {"section": "4.2"}),
        ("EU AI Act preamble", {}),
    ],
)
def test_a_label_fills_the_placeholders_it_names(label, values):
    assert label_values(label) == values


def test_the_page_fills_page():
    assert label_values("Policy, p. 3", page=3) == {"page": "3"}


def test_the_first_rule_the_label_fills_wins_and_the_fragment_is_dropped_when_none_does():
    links = DocumentLinks((
        LinkRule("https://x.example/code#s{section}", label_contains="Code"),
        LinkRule("https://x.example/handbook#sec-{section}"),
    ))
    assert links.url_for("Code § 5-301(b)") == "https://x.example/code#s5-301"
    assert links.url_for("Handbook § 7") == "https://x.example/handbook#sec-7"
    assert links.url_for("Handbook, p. 2") == "https://x.example/handbook"  # no section: the page itself
    assert DocumentLinks.single("https://x.example/{section}.html").url_for("Handbook, p. 2") == ""


def test_values_are_percent_encoded():
    assert LinkRule("https://x.example/#{section}").expand({"section": "1/2 a"}) == "https://x.example/#1%2F2%20a"


@pytest.mark.parametrize(
    ("pattern", "problem"),
    [
        ("ftp://x.example/a", "not an http(s) address"),
        ("policy.pdf", "not an http(s) address"),
        ("https://x.example/#{chapter}", "unknown placeholder {chapter}"),
        ("https://x.example/#{section", "brace"),
        ("https://x.example/#{section:>4}", "not a plain name"),
        ("https://x.example/a b", "spaces"),
        ("https://x.example/" + "a" * 1000, "at most 1000"),
    ],
)
def test_an_unusable_pattern_is_refused_with_a_reason(pattern, problem):
    with pytest.raises(LinkPatternError, match=re.escape(problem)):
        check_pattern(pattern)


def test_a_plain_url_and_a_pattern_are_accepted():
    assert check_pattern(" https://x.example/policy.pdf ") == "https://x.example/policy.pdf"
    assert check_pattern("https://x.example/policy.pdf#page={page}") == "https://x.example/policy.pdf#page={page}"


# --- the manifest's patterns (bot/corpora.toml) --------------------------------------------------


def _manifest_url(collection: str, file_name: str, label: str) -> str:
    from pathlib import Path

    links = manifest_links(load_manifest())[collection][doc_id_for(Path(file_name))]
    return links.url_for(label)


@pytest.mark.parametrize(
    ("label", "url"),
    [
        ("EU AI Act Art. 99(3)", f"{EUR_LEX}#art_99"),
        ("EU AI Act Art. 5(1)(a)", f"{EUR_LEX}#art_5"),
        ("EU AI Act Recital 12", f"{EUR_LEX}#rct_12"),
        ("EU AI Act Annex III(1)", f"{EUR_LEX}#anx_III"),
        ("EU AI Act Annex I, Section A(1)", f"{EUR_LEX}#anx_I"),
        ("EU AI Act preamble", EUR_LEX),
    ],
)
def test_the_eu_ai_act_links_to_eur_lex_anchors(label, url):
    assert _manifest_url("eu-ai-act", "EUAIACT.pdf", label) == url


NYC_RULE = "https://rules.cityofnewyork.us/rule/automated-employment-decision-tools-updated/"
NYC_CODE = "https://codelibrary.amlegal.com/codes/newyorkcity/latest/NYCadmin/0-0-0-1"


@pytest.mark.parametrize(
    ("file_name", "label", "url"),
    [
        ("LL144_rules.pdf", "6 RCNY § 5-301(b)", NYC_RULE),
        ("LL144_rules.pdf", "6 RCNY § 5-302(b), Example 1", NYC_RULE),
        ("LL144_rules.pdf", "DCWP Notice of Adoption (Statement of Basis and Purpose)", NYC_RULE),
        ("LL144_rules.pdf", "Admin. Code § 20-871(a)", NYC_CODE),
        ("LL144_Definitions.pdf", "Admin. Code § 20-870", NYC_CODE),
        ("LL144_Definitions.pdf", "Int. No. 1894-A § 1", "https://legistar.council.nyc.gov/LegislationDetail.aspx?ID=4344524&GUID=B051915D-A9AC-451E-81F8-6596032FA3F9"),
    ],
)
def test_ll144_links_to_the_nyc_rules_and_the_administrative_code(file_name, label, url):
    assert _manifest_url("ll144", file_name, label) == url


def test_every_manifest_pattern_is_valid():
    for corpus in load_manifest().corpora.values():
        for f in corpus.files:
            assert f.links, f"{f.name} has no link patterns"
            for rule in f.links:
                assert check_pattern(rule.url) == rule.url


# --- answers ----------------------------------------------------------------------------------------


def toy_links(pattern: str = "https://toy.example/code#s{section}") -> CitationLinks:
    return CitationLinks(lambda collection: {"toy-doc": DocumentLinks.single(pattern)} if collection == "toy" else {})


def test_an_answers_citations_get_the_address_of_what_they_cite():
    generator = LinkingGenerator(toy_generator(), toy_links())
    answer = generator.generate("What is the civil penalty for a first violation?", scored())
    assert answer.citations and not answer.refused
    for c in answer.citations:
        assert c.url == "https://toy.example/code#s" + c.label.split("§ ")[1].split("(")[0]


def test_a_citation_of_an_unknown_document_or_chunk_stays_without_a_link():
    links = CitationLinks(lambda collection: {})
    answer = Answer("x [1]", refused=False, citations=[Citation(1, TOY_CHUNKS[0].id, TOY_CHUNKS[0].label, "q")])
    assert links.link(answer, scored()).citations[0].url == ""
    answer = Answer("x [1]", refused=False, citations=[Citation(1, "gone", "Toy Code § 9", "q")])
    assert toy_links().link(answer, scored()).citations[0].url == ""


def test_a_failing_pattern_lookup_costs_the_link_not_the_answer(caplog):
    def broken(collection):
        raise RuntimeError("index down")

    answer = Answer("x [1]", refused=False, citations=[Citation(1, TOY_CHUNKS[2].id, TOY_CHUNKS[2].label, "q")])
    linked = CitationLinks(broken).link(answer, scored())
    assert linked.citations == answer.citations and "citations go without links" in caplog.text


def test_the_wrapper_passes_other_attributes_through():
    inner = toy_generator()
    assert LinkingGenerator(inner, toy_links())._term_stats is inner._term_stats


def test_claudes_verified_citations_and_its_fallbacks_carry_links(fake, tmp_path):
    """Through Components (as `hypa serve` builds it) with a key: the real anthropic SDK against the
    fake API; the first answer is Claude's, the second the extractive fallback's after a 500."""
    from hypa_testkit.fakes.anthropic_server import error_reply
    from hypa_testkit.slack_harness import toy_components, toy_settings
    from tests.test_claude_generator import cited_answer

    settings = toy_settings(tmp_path, "http://127.0.0.1:9", anthropic_api_key="test-key",
                            anthropic_base_url=fake.base_url, llm_max_retries=0)
    components = toy_components(settings)
    components.index.set_source_url("toy", "toy-doc", "https://toy.example/code#s{section}")
    fake.enqueue(cited_answer(), error_reply(500, "api_error", "boom"))
    question = "How many business days before selling must a seller notify buyers?"
    for model in ("claude-sonnet-5-5", "extractive"):
        answer = components.generator.generate(question, scored())
        assert answer.model == model and answer.citations
        for c in answer.citations:
            assert c.url == "https://toy.example/code#s" + c.label.split("§ ")[1].split("(")[0], (model, c)
