"""The extractive generator quotes only retrieved text, cites it, and abstains when it must."""
from __future__ import annotations

import re
from dataclasses import replace

import numpy as np
import pytest

from hypa_testkit.toy import scored, toy_generator


def _contexts_by_id():
    return {sc.chunk.id: sc.chunk.text for sc in scored()}


def test_answer_quotes_the_rule_and_cites_it():
    answer = toy_generator().generate("How many business days before selling must a seller notify buyers?", scored())
    assert not answer.refused
    assert "ten business days" in answer.text
    assert any(c.label == "Toy Code § 1-102(a)" for c in answer.citations)
    assert answer.text.rstrip().endswith("]")


def test_every_quote_is_verbatim_in_its_chunk_and_answer_only_contains_quotes_and_their_frames():
    texts = _contexts_by_id()
    for q in (
        "What is a widget audit?",
        "What is the civil penalty for a subsequent violation?",
        "How can notice be given?",
    ):
        answer = toy_generator().generate(q, scored())
        assert not answer.refused, q
        assert answer.citations
        rest = answer.text
        for c in answer.citations:
            assert c.quote in texts[c.chunk_id]
            rest = rest.replace(" ".join(c.quote.split()), "")
        # What is left is only the frames naming each provision and the citation markers: nothing
        # outside the law's text is said about it.
        frames = [line for line in rest.splitlines() if line]
        assert frames and all(
            re.fullmatch(r"(?:And u|U)nder Toy Code § [\d()a-z-]+(?: \([^)]*\))?: “(?: … )*” \[\d\]", f) for f in frames
        ), frames


def test_citation_numbers_follow_first_use():
    answer = toy_generator().generate("What is the civil penalty and how many days notice before selling?", scored())
    numbers = [c.n for c in answer.citations]
    assert numbers[0] == 1 and sorted(set(numbers)) == list(range(1, max(numbers) + 1))


def test_question_the_provisions_do_not_address_is_refused_without_citations():
    answer = toy_generator().generate("What colour must the packaging of a gadget be in Norway?", scored())
    assert answer.refused
    assert answer.citations == []
    assert "don't address" in answer.text


def test_no_contexts_means_refusal():
    answer = toy_generator().generate("What is a widget audit?", [])
    assert answer.refused and answer.citations == []


# --- frames, headings, the sentence model ---------------------------------------------------------
from core.extractive import SENTENCE_FEATURES, ExtractiveConfig, ExtractiveGenerator, provision_name  # noqa: E402
from core.linear import LinearModel  # noqa: E402
from core.termstats import TermStats  # noqa: E402
from core.types import ScoredChunk  # noqa: E402
from hypa_testkit.toy import make_chunk  # noqa: E402
from storage.embedder import HashingEmbedder  # noqa: E402

# No word-overlap support test: the value binding alone decides whether a value is stated.
BINDING_ONLY = ExtractiveConfig(min_support=0.0)


def test_the_answer_names_the_provision_and_never_quotes_its_heading_lines():
    chunk = make_chunk(
        "Toy Act Art. 4",
        "Article 4\nWidget literacy\nSellers shall ensure that their staff understand widgets well enough.",
        heading="Widget literacy",
    )
    generator = ExtractiveGenerator(lambda c: TermStats.from_texts([chunk.text]))
    answer = generator.generate("Must sellers train their staff on widgets?", [ScoredChunk(chunk, 1.0)])
    assert answer.text.startswith("Under Toy Act Art. 4 (Widget literacy): “Sellers shall ensure")
    assert [c.quote for c in answer.citations] == ["Sellers shall ensure that their staff understand widgets well enough."]


@pytest.mark.parametrize(
    ("text", "heading", "first_quote"),
    [
        # label and heading opening the first line: the quote starts after them
        ("§ 1-103 Penalties. a. A seller that violates this chapter is liable for a civil penalty.", "Penalties.",
         "a. A seller that violates this chapter is liable for a civil penalty."),
        # a heading that is a sentence of its own
        ("§ 1-104 Notice to Buyers and Sellers.\n(a) The notice must say how a buyer can ask for a refund.",
         "Notice to Buyers and Sellers.", "(a) The notice must say how a buyer can ask for a refund."),
        # the parent heading of a definitions unit ("Definitions — Widget Audit")
        ("§ 1-100. Definitions.\nAs used in this chapter, the following terms have these meanings:",
         "Definitions — Widget Audit", "As used in this chapter, the following terms have these meanings:"),
    ],
)
def test_a_heading_is_never_quoted_inline_or_as_a_sentence(text, heading, first_quote):
    from core.extractive import _sentences

    chunk = make_chunk("Toy Code § 1-10x", text, heading=heading)
    assert _sentences([chunk])[0].text([chunk]) == first_quote


@pytest.mark.parametrize(
    ("label", "quote", "name"),
    [
        ("EU AI Act Annex III(4)", "(a) AI systems intended to be used for recruitment", "EU AI Act Annex III(4)(a)"),
        ("EU AI Act Art. 9(1)–(2)", "2. The risk management system shall be", "EU AI Act Art. 9(2)"),
        ("EU AI Act Art. 5(1)(f)", "(f) the placing on the market", "EU AI Act Art. 5(1)(f)"),
        ("6 RCNY § 5-303(c)", "An employer must keep the summary posted", "6 RCNY § 5-303(c)"),
    ],
)
def test_provision_name_narrows_to_the_quoted_item(label, quote, name):
    assert provision_name(make_chunk(label, quote), quote) == name
    assert provision_name(make_chunk(label, quote, heading="Penalties."), quote) == f"{name} (Penalties)"


def test_a_value_question_leads_with_the_sentence_that_states_the_value_whatever_the_model_says():
    # a sentence model that prefers anything but the value
    contrary = LinearModel.of(SENTENCE_FEATURES, {"states_value": -10.0})
    generator = ExtractiveGenerator(
        lambda c: TermStats.from_texts(ch.text for ch in [sc.chunk for sc in scored()]), model=contrary
    )
    answer = generator.generate("How much is the civil penalty for a first violation?", scored())
    assert "$500" in answer.citations[0].quote


class _VectorsByText:
    """Sentence vectors whose cosine to the query vector (e0) is `near` for sentences holding `marker`
    and `elsewhere` for all others."""

    def __init__(self, marker: str, near: float, elsewhere: float = 0.6):
        self.marker, self.near, self.elsewhere = marker, near, elsewhere

    def get(self, texts):
        cos = np.array([self.near if self.marker in t else self.elsewhere for t in texts], dtype=np.float32)
        return np.stack([cos, np.sqrt(1 - cos**2)], axis=1)


@pytest.mark.parametrize("near, refused", [(0.7, False), (0.3, True)])
def test_a_value_counts_only_in_a_sentence_close_in_meaning_to_the_question(near, refused):
    # The period shares the question's words either way; only its sentence's meaning decides.
    stats = TermStats.from_texts(sc.chunk.text for sc in scored())
    generator = ExtractiveGenerator(lambda c: stats, sentence_vectors=_VectorsByText("ten business days", near))
    answer = generator.generate(
        "How many business days before selling must a seller notify buyers?",
        scored(),
        query_vector=np.array([1.0, 0.0], dtype=np.float32),
    )
    assert answer.refused is refused
    if refused:
        assert "They state no period or deadline for it." in answer.text
    else:
        assert "ten business days" in answer.text


def test_words_the_law_never_uses_that_say_nothing_do_not_thin_a_value_binding_that_meaning_checks():
    """"hey, how much heads-up do buyerz need before the AI selling kicks in?": "hey", "kicks", the
    typo "buyerz" and "AI" are in no clause of the toy law; counted, they leave the notice period's
    clause too small a share of what was asked. With sentence vectors, meaning judges them; without,
    they still count. A word that names what the value is about ("file a complaint") still counts."""
    stats = TermStats.from_texts(sc.chunk.text for sc in scored())
    question = "hey, how much heads-up do buyerz need before the AI selling kicks in? quick one pls thx"
    close = _VectorsByText("ten business days", 0.7)
    generator = ExtractiveGenerator(lambda c: stats, sentence_vectors=close)
    answer = generator.generate(question, scored(), query_vector=np.array([1.0, 0.0], dtype=np.float32))
    assert not answer.refused and "ten business days" in answer.text
    without_meaning = ExtractiveGenerator(lambda c: stats).generate(question, scored())
    assert "They state no period or deadline for it." in without_meaning.text
    complaint = generator.generate(
        "How long do buyers have to file a complaint?",
        scored(),
        query_vector=np.array([1.0, 0.0], dtype=np.float32),
    )
    assert "They state no period or deadline for it." in complaint.text


def test_a_sentence_very_close_in_meaning_states_the_asked_value_without_sharing_the_questions_words():
    """"how long do they have to ask for the judge's ok?" is answered by "authorisation is requested
    ... within 24 hours": none of the user's words is the law's. A sentence this close in meaning
    binds the value by meaning alone; one only close enough still needs the words, and so does one
    sharing some of them ("How long do buyers have to file a complaint?" above)."""
    stats = TermStats.from_texts(sc.chunk.text for sc in scored())
    question = "In a rush, how long may the shopkeeper wait before telling the shoppers?"
    very_close = ExtractiveGenerator(lambda c: stats, sentence_vectors=_VectorsByText("ten business days", 0.7))
    answer = very_close.generate(question, scored(), query_vector=np.array([1.0, 0.0], dtype=np.float32))
    assert not answer.refused and "ten business days" in answer.text
    close = ExtractiveGenerator(lambda c: stats, sentence_vectors=_VectorsByText("ten business days", 0.5))
    refused = close.generate(question, scored(), query_vector=np.array([1.0, 0.0], dtype=np.float32))
    assert "They state no period or deadline for it." in refused.text


def test_which_words_the_law_never_uses_say_nothing_of_what_is_asked():
    from core.extractive import _says_nothing

    stats = TermStats.from_texts(["The seller must screen buyers before the sale.", "Candidates may ask."])
    for word in ("hey", "kick", "get", "ai", "screener", "canid", "hav", "befor", "teh", "doesn"):
        assert _says_nothing(word, stats), word
    for word in ("complaint", "salari", "sunset", "calendar", "tomorrow"):
        assert not _says_nothing(word, stats), word


def test_a_worked_example_never_states_the_asked_value():
    """An example's "3 years" is its scenario's, not a rule: "how many years must we keep the data?"
    is not answered by "An employer has used the tool for 3 years"."""
    example = make_chunk(
        "Toy Code § 1-130, Example 1",
        "A seller has kept widget data for 3 years and will soon need a new widget audit.",
        heading="Data Requirements — Example 1",
    )
    rule = make_chunk("Toy Code § 1-131", "A seller shall keep widget data for 5 years after the last sale.")
    stats = TermStats.from_texts([example.text, rule.text, "Buyers may ask sellers for the widget data."])
    generator = ExtractiveGenerator(lambda c: stats, BINDING_ONLY)
    question = "How many years do we have to hang on to the widget data?"
    answer = generator.generate(question, [ScoredChunk(example, 1.0), ScoredChunk(rule, 0.9)])
    assert answer.text.startswith("Under Toy Code § 1-131"), answer.text
    assert "They state no period" in generator.generate(question, [ScoredChunk(example, 1.0)]).text
    # ... unless the question is about the example
    about_it = generator.generate("In Example 1, how many years had the seller kept widget data?", [ScoredChunk(example, 1.0)])
    assert not about_it.refused and "3 years" in about_it.text


def test_a_value_sentence_may_be_close_in_meaning_to_the_part_that_asks_instead():
    """"We put the notice in the shop window this morning. How soon may we sell?": the opening scene
    pulls the whole message away from the clause stating the period; the asking part alone (its
    embedding from retrieval: `asking_vectors`) is close to it."""
    stats = TermStats.from_texts(sc.chunk.text for sc in scored())
    # the period's sentence: cosine 0.3 to the whole message (e0), 0.95 to the asking part (e1)
    generator = ExtractiveGenerator(lambda c: stats, sentence_vectors=_VectorsByText("ten business days", 0.3))
    question = "How many business days before selling must a seller notify buyers?"
    whole, asking = np.array([1.0, 0.0], dtype=np.float32), np.array([[0.0, 1.0]], dtype=np.float32)
    assert "They state no period or deadline for it." in generator.generate(question, scored(), query_vector=whole).text
    answer = generator.generate(question, scored(), query_vector=whole, asking_vectors=asking)
    assert not answer.refused and "ten business days" in answer.text
    # So for the floor below which nothing is close enough to answer: every sentence at 0.2 to the
    # whole message ("I'm applying for jobs in France. Does a company have to tell me …?")
    far = ExtractiveGenerator(lambda c: stats, sentence_vectors=_VectorsByText("ten business days", 0.2, elsewhere=0.2))
    who = "Who must notify buyers before selling?"
    assert far.generate(who, scored(), query_vector=whole).refused
    assert not far.generate(who, scored(), query_vector=whole, asking_vectors=asking).refused


def test_a_model_for_other_features_is_refused():
    with pytest.raises(ValueError, match="SENTENCE_FEATURES"):
        ExtractiveGenerator(lambda c: None, model=LinearModel(("x",), np.zeros(1, dtype=np.float32)))


def test_the_definition_of_a_term_no_provision_uses_is_declined():
    answer = toy_generator().generate("What is the definition of 'widget broker'?", scored())
    assert answer.refused and "They define no such term." in answer.text
    defined = toy_generator().generate("What is the definition of a 'widget audit'?", scored())
    assert not defined.refused and "widget audit" in defined.text


def test_front_matter_is_never_quoted_while_a_provision_can_be():
    front = make_chunk("Toy Bill", "The Toy Council Legislation Text. A Local Law to amend the toy code, in relation to widgets.")
    contexts = [ScoredChunk(front, 2.0), *scored()]
    answer = toy_generator().generate("Was the local law on widget notice to buyers passed?", contexts)
    assert all(c.label != "Toy Bill" for c in answer.citations)


def test_a_tables_rows_are_quoted_only_for_a_question_about_the_example():
    table = make_chunk(
        "Toy Code § 1-103, Example",
        "Example: A seller audits its widgets as follows: Widget Buyers Rate Ratio Red 92 54.3% 1.00 "
        "Blue 76 44.7% 0.82 Green 40 37.5% 0.58 Yellow 12 25% 0.33.",
    )
    contexts = [ScoredChunk(table, 2.0), *scored()]
    situational = toy_generator().generate("Our green widgets are about 1% of buyers; what civil penalty applies?", contexts)
    assert not situational.refused and "54.3%" not in situational.text
    about_example = toy_generator().generate("In the example table, what ratio do green widget buyers get?", contexts)
    assert "0.58" in about_example.text


def test_a_name_the_regulations_never_use_is_not_answered_about():
    from core.extractive import unknown_names

    stats = TermStats.from_texts(c.text for c in [sc.chunk for sc in scored()])
    assert unknown_names("We also sell in Chicago. What does Illinois require of sellers?", stats) == ["Illinois"]
    assert unknown_names("Is the WidgetPro 3000 covered?", stats) == ["WidgetPro"]
    assert unknown_names("Has Acme's widget been notified?", stats) == ["Acme"]  # a possessive is still a name
    assert unknown_names("Must a seller notify buyers by Friday under LL144?", stats) == []  # a day, the law's name
    assert unknown_names("What is the date in Document 27?", stats) == []  # a numbered part
    assert unknown_names("We sell in Chicago. Must sellers notify buyers?", stats) == []  # not in the asking sentence
    # Every sentence that asks counts, not only the last one; a closing statement asks nothing.
    assert unknown_names("Which agency in Germany enforces it? Want to know who to call.", stats) == ["Germany"]
    assert unknown_names("Must sellers notify buyers? We also sell in Chicago.", stats) == []
    # A statement before ", do we …?" sets the scene like a sentence of its own; a condition asks.
    assert unknown_names("we sell widgets in our german shops, do we have to notify buyers?", stats) == []
    assert unknown_names("If we also sell in Illinois, do we have to notify buyers?", stats) == ["Illinois"]
    assert unknown_names("Our shop runs on Shopify — do we have to notify buyers?", stats) == []  # a dash too
    assert unknown_names("Does John, who sells widgets, have to notify buyers?", stats) == ["John"]
    # A place or a language typed in lower case is still a name; an everyday word is not.
    assert unknown_names("do we need the notice in spanish too?", stats) == ["Spanish"]
    assert unknown_names("must sellers in illinois notify buyers?", stats) == ["Illinois"]
    assert unknown_names("must sellers notify buyers about the turkey?", stats) == []
    # "in plain English" says how to answer, not which language the law is about
    assert unknown_names("What must sellers tell buyers, in plain English?", stats) == []
    assert unknown_names("what must sellers tell buyers in simple english?", stats) == []
    # a name given as an example of a kind the regulations speak of asks about that kind; a place never does
    assert unknown_names("Must a seller like Acme notify buyers?", stats) == []
    assert unknown_names("Must a seller in a state like Illinois notify buyers?", stats) == ["Illinois"]
    assert unknown_names("Must sellers notify buyers in English?", stats) == ["English"]
    # One side of an either/or the collection knows: the question asks which, and the law can say.
    assert unknown_names("Who notifies buyers, the sellers or Brussels?", stats) == []
    assert unknown_names("Who audits widgets - the widget SNSAs or Brussels?", stats) == []  # a phrase the law knows
    # A name the glossary gives the law's words for is not one the law is silent about.
    assert unknown_names("How long before we have to tell Brussels?", stats) == ["Brussels"]
    assert unknown_names("How long before we have to tell Brussels?", stats, frozenset({"brussels"})) == []
    assert unknown_names("Must sellers notify buyers in Illinois or Colorado?", stats) == ["Illinois", "Colorado"]
    # Where someone lives or a seller sits is a question of whom the law reaches, which it answers.
    assert unknown_names("If a buyer lives in Jersey City, must sellers notify them?", stats) == []
    assert unknown_names("We're based in San Francisco, must our sellers notify buyers?", stats) == []
    assert unknown_names("must sellers headquartered in texas notify buyers?", stats) == []
    assert unknown_names("If a buyer moves to Jersey City, must sellers notify them?", stats) == ["Jersey", "City"]
    answer = toy_generator().generate("What does Illinois require of sellers?", scored())
    assert answer.refused and "They do not mention Illinois." in answer.text


def test_a_question_about_another_places_law_is_not_answered_about():
    """The law of a place the collection never names, asked about in the sentence that asks or as
    "their laws" after a statement naming the places; a place alone, or another law only stated as
    the scene, is not one of these."""
    from core.extractive import other_laws, unknown_names

    stats = TermStats.from_texts(c.text for c in [sc.chunk for sc in scored()])
    assert other_laws("Our parent asked about the Colorado AI Act - does it have the same deadlines?", stats) == ["Colorado"]
    assert other_laws("We also sell in Colorado and Illinois. Do their widget laws require notice too?", stats) == [
        "Colorado", "Illinois"
    ]
    assert other_laws("We also sell in the UK. What does the UK require for widget notices?", stats) == ["UK"]
    assert other_laws("does california law require this too?", stats) == ["California"]
    # what its regulator or government expects is its law too
    assert other_laws("we only sell in the UK, not here. what does the UK's AI regulator expect from us?", stats) == ["UK"]
    assert other_laws("What does the Colorado government expect from widget sellers?", stats) == ["Colorado"]
    # in the possessive, and with a few words naming the law
    assert other_laws("We also hire in Chicago. Does Illinois' AI video interview law require an audit?", stats) == ["Illinois"]
    assert other_laws("Is Colorado's AI Act stricter?", stats) == ["Colorado"]
    assert other_laws("We sell in Colorado. Must sellers notify buyers?", stats) == []  # a place alone
    assert other_laws("We follow Illinois rules already. Must sellers notify buyers?", stats) == []  # the scene
    assert other_laws("Our US supplier says its widgets meet the requirements; must we notify buyers?", stats) == []
    # the sentence that asks names the place and its law: declined with the place named
    assert unknown_names("Our parent asked about the Colorado AI Act - does it have the same deadlines?", stats) == [
        "Colorado"
    ]
    answer = toy_generator().generate("We also sell in the UK. What does the UK require of sellers?", scored())
    assert answer.refused and "They do not mention UK." in answer.text


def test_markdown_html_and_page_numbers_are_never_quoted():
    text = (
        "## § 2 Notice.\n**(a)** A seller shall notify each buyer ten business days before selling a widget.\n"
        "<p>Notice may be given by mail or e-mail.</p>\n\nPage 3"
    )
    chunk = make_chunk("Widget Rules § 2", text, heading="Notice")
    generator = ExtractiveGenerator(lambda c: TermStats.from_texts([text]))
    answer = generator.generate(
        "How many days before selling must a seller notify each buyer by mail?", [ScoredChunk(chunk, 1.0)]
    )
    quotes = [c.quote for c in answer.citations]
    assert quotes and all(q in text for q in quotes)
    assert not any(mark in q for q in quotes for mark in ("#", "**", "<p>", "</p>", "Page 3"))
    assert "A seller shall notify each buyer ten business days before selling a widget." in quotes


def test_a_drafters_stamp_after_the_last_sentence_is_never_quoted():
    text = "§ 2. This local law takes effect on January 1, 2023.\n\nSJ/ IB\nLS #11903\n11/1/2021 11:32 pm"
    chunk = make_chunk("Toy Bill § 2", text)
    generator = ExtractiveGenerator(lambda c: TermStats.from_texts([text]))
    answer = generator.generate("When does the local law take effect?", [ScoredChunk(chunk, 1.0)])
    quotes = [c.quote for c in answer.citations]
    assert any("January 1, 2023" in q for q in quotes)
    assert not any("11903" in q or "11:32" in q for q in quotes)


def test_a_duty_of_another_operator_does_not_lead_when_the_asked_ones_is_quoted():
    deployers = make_chunk(
        "Art. 26(8)",
        "8. Deployers of high-risk AI systems shall inform the distributor and the provider where the "
        "high-risk AI system does not comply with the requirements.",
    )
    distributors = make_chunk(
        "Art. 24(4)",
        "4. A distributor that considers that a high-risk AI system does not comply shall take corrective actions.",
    )
    texts = [deployers.text, distributors.text]
    generator = ExtractiveGenerator(lambda c: TermStats.from_texts(texts))
    contexts = [ScoredChunk(deployers, 2.0), ScoredChunk(distributors, 1.0)]
    answer = generator.generate(
        "We are a distributor: what must we do when the high-risk AI system does not comply with the requirements?",
        contexts,
    )
    assert answer.citations[0].label == "Art. 24(4)"
    # no operator named, or the one the best sentence is about: the ranking's choice stands
    neutral = generator.generate(
        "What happens when the high-risk AI system does not comply with the requirements?", contexts
    )
    assert neutral.citations[0].label == "Art. 26(8)"


def test_a_list_item_quoted_with_its_lead_in_is_not_quoted_again():
    text = (
        "(b) Notices required. A seller shall notify each buyer of the following: 1. That a widget audit was done "
        "on the widget. 2. The name of the independent reviewer who audited the widget."
    )
    chunk = make_chunk("Toy Code § 1-104(b)", text)
    generator = ExtractiveGenerator(lambda c: TermStats.from_texts([text]))
    answer = generator.generate(
        "What must a seller tell buyers about the widget audit and the reviewer?", [ScoredChunk(chunk, 1.0)]
    )
    assert answer.text.count("That a widget audit was done") == 1
    quotes = [c.quote for c in answer.citations]
    assert not any(a != b and a in b for a in quotes for b in quotes)


def test_a_list_is_quoted_with_the_sentence_each_item_may_have_but_not_what_follows_the_list():
    text = (
        "(b) Notices required. A seller shall notify each buyer of the following: 1. That a widget audit was done "
        "on the widget. Such notice shall be made ten business days before the sale; 2. The widget's colour "
        "and price. Such notice shall be made in writing. Records of widget sales shall be kept by the seller."
    )
    chunk = make_chunk("Toy Code § 1-104(b)", text)
    generator = ExtractiveGenerator(lambda c: TermStats.from_texts([text]))
    answer = generator.generate("What must the notice to buyers tell them?", [ScoredChunk(chunk, 1.0)])
    lead = next(c.quote for c in answer.citations if "A seller shall notify" in c.quote)
    assert "ten business days" in lead and "2. The widget's colour and price." in lead
    assert "Records of widget sales" not in lead  # two sentences that are no item end the list


_RETENTION = make_chunk(
    "Toy Code § 1-104",
    "§ 1-104 Records. The seller shall, for a period ending 3 years after the last sale, keep at the disposal of "
    "the department:\n(a) each widget audit report;\n(b) the notices sent to buyers.",
)


def _retention_answer(question: str):
    contexts = [ScoredChunk(_RETENTION, 1.0), *scored()[1:]]
    # The collection: the retention rule and all of the toy code (§ 1-101's reviewer is not quoted).
    stats = TermStats.from_texts([_RETENTION.text, *(sc.chunk.text for sc in scored())])
    return ExtractiveGenerator(lambda c: stats).generate(question, contexts)


def test_a_period_in_a_list_lead_in_is_about_the_items_it_leads():
    # The lead-in holds the period; what it is the period of ("widget audit reports") is in its items.
    answer = _retention_answer("For how many years do widget audit reports have to be retained?")
    assert not answer.refused and "3 years" in answer.text


def test_a_subject_the_collection_never_uses_does_not_rule_out_every_provision():
    answer = _retention_answer("How many years does the franchisee have to keep each widget audit report?")
    assert not answer.refused and "3 years" in answer.text
    # A subject the collection does use still must be in the provision stating the value.
    assert _retention_answer("How many years does the reviewer have to keep each widget audit report?").refused


def test_clipped_words_stand_for_the_collection_word_they_begin():
    from core.extractive import _unclipped

    stats = TermStats.from_texts(["technical documentation kept", "documentation of the document"])
    unclipped = _unclipped({"doc": 9.0, "tech": 9.0, "zzz": 9.0, "kept": 1.0}, stats)
    assert set(unclipped) == {"document", "technic", "zzz", "kept"}
    assert unclipped["document"] == stats.idf("document")


@pytest.mark.parametrize(
    "question",
    [
        # the scene after the question is not what the value is about
        "How many business days before selling must a seller notify buyers? Our compliance team keeps "
        "chasing a rollout schedule for the warehouse staff and the regional managers.",
        # of two questions, the value is about the one asking for it
        "Do our warehouse staff and the regional managers get trained on the compliance rollout schedule "
        "first? How many business days before selling must a seller notify buyers?",
    ],
)
def test_the_value_is_bound_to_the_sentence_that_asks_for_it(question):
    stats = TermStats.from_texts(sc.chunk.text for sc in scored())
    generator = ExtractiveGenerator(lambda c: stats, sentence_vectors=_VectorsByText("ten business days", 0.7))
    answer = generator.generate(question, scored(), query_vector=np.array([1.0, 0.0], dtype=np.float32))
    assert not answer.refused and "ten business days" in answer.text


def test_a_clause_keeping_all_of_what_a_retention_question_keeps_answers_it_however_much_scene_it_sets():
    # The scene's words (the portal, the tenant, the nightly exports) are in no clause, so they leave
    # too little of the question in the record-keeping clause to bind its period; naming the records
    # kept does. A period for keeping something else (the summary) still does not answer.
    chunks = [
        make_chunk("Toy Code § 2-101", "A seller must keep the summary of results posted for at least 6 months."),
        make_chunk("Toy Code § 2-102", "A seller shall keep each audit record for three years. Buyer data may be shared."),
    ]
    stats = TermStats.from_texts(c.text for c in chunks)
    generator = ExtractiveGenerator(lambda c: stats, sentence_vectors=_VectorsByText("", 0.7))
    toward = np.array([1.0, 0.0], dtype=np.float32)
    scene = "Ops here: our cloud portal writes nightly exports into our tenant. How long do we have to keep those audit records?"
    answer = generator.generate(scene, scored(chunks), query_vector=toward)
    assert not answer.refused and answer.text.startswith("Under Toy Code § 2-102"), answer.text
    other = "Ops here: our cloud portal writes nightly exports into our tenant. How long do we have to keep the buyer data?"
    assert generator.generate(other, scored(chunks), query_vector=toward).refused


def test_a_follow_up_searched_with_the_question_before_it_asks_only_its_own_part():
    from core.followup import asking_part
    from core.types import Turn

    earlier = "How many years must a seller keep its records?"
    history = [Turn("user", earlier), Turn("assistant", "The loaded regulations don't address this question.")]
    question = f"{earlier} And what is the civil penalty for a first violation?"
    assert asking_part(question, history) == "And what is the civil penalty for a first violation?"
    assert asking_part("Who enforces the law?", history) is None
    assert asking_part(question, []) is None
    # The earlier question asked for a period the toy code does not state; the follow-up does not.
    answer = toy_generator().generate(question, scored(), history)
    assert not answer.refused and "$500" in answer.text


def test_a_follow_up_asking_how_long_is_about_what_the_question_before_it_named():
    """"how long would we get to do that?" names nothing new ("long" asks, "get" says nothing of
    what): its period is about the corrective action the question before it asked about."""
    from core.types import Turn

    rule = make_chunk(
        "Toy Code § 1-179",
        "The authority shall require the seller to take corrective action to fix the widget within 15 working days.",
    )
    other = make_chunk("Toy Code § 1-180", "A buyer may return a widget within 30 days of the sale.")
    stats = TermStats.from_texts([rule.text, other.text, "The maker sells widgets to buyers."])
    earlier = "Can the authority require the seller to fix a faulty widget?"
    history = [Turn("user", earlier), Turn("assistant", "Yes: the authority requires corrective action.")]
    question = f"{earlier} how long would we get to do that?"
    answer = ExtractiveGenerator(lambda c: stats, BINDING_ONLY).generate(
        question, [ScoredChunk(rule, 1.0), ScoredChunk(other, 0.5)], history
    )
    assert not answer.refused and "15 working days" in answer.text


def test_a_follow_up_whose_only_new_words_say_nothing_of_what_keeps_its_lead():
    """"ok what does it actually have to cover?" names no new topic: "cover" and "actually" say
    nothing of what, so a sentence that happens to use "cover" does not lead."""
    from core.types import Turn

    assessment = make_chunk(
        "Toy Code § 1-127(1)",
        "Before selling, a seller shall perform an impact assessment that consists of a description of the "
        "widget's use and the categories of buyers likely to be affected.",
    )
    unrelated = make_chunk("Toy Code § 1-105(1)(g)", "This prohibition does not cover any labelling of lawfully made widgets.")
    stats = TermStats.from_texts([assessment.text, unrelated.text, "The maker sells widgets to buyers."])
    earlier = "Do we need an impact assessment before selling widgets?"
    history = [Turn("user", earlier), Turn("assistant", "Yes: § 1-127(1) requires one.")]
    answer = ExtractiveGenerator(lambda c: stats).generate(
        f"{earlier} ok what does it actually have to cover?",
        [ScoredChunk(assessment, 1.0), ScoredChunk(unrelated, 0.9)],
        history,
    )
    assert answer.text.startswith("Under Toy Code § 1-127(1)"), answer.text


def test_us_is_the_asker_not_what_a_value_is_about():
    """"how long until they tell us if we're in?": the period is about the decision on the application
    the question before it named; "us", a word the law never uses, is no part of what to bind."""
    from core.types import Turn

    rule = make_chunk(
        "Toy Code § 1-158(2)(a)",
        "The authority shall inform applicants to the widget sandbox of its decision within three months of the application.",
    )
    stats = TermStats.from_texts([rule.text, "The maker sells widgets to buyers."])
    earlier = "Can a small seller apply to the widget sandbox?"
    history = [Turn("user", earlier), Turn("assistant", "Yes.")]
    answer = ExtractiveGenerator(lambda c: stats, BINDING_ONLY).generate(
        f"{earlier} how long until they tell us if we're in?", [ScoredChunk(rule, 1.0)], history
    )
    assert not answer.refused and "three months" in answer.text


def test_a_users_word_the_law_never_uses_is_bound_by_the_glossarys_law_words():
    from core.glossary import Glossary

    loose = BINDING_ONLY
    penalties = make_chunk(
        "Toy Code § 1-103",
        "§ 1-103 Penalties. A seller that violates this chapter is liable for a civil penalty of not more than "
        "$500 for a first violation.",
    )
    notice = make_chunk("Toy Code § 1-104", "§ 1-104 Notice. A seller shall notify buyers before each sale.")
    stats = TermStats.from_texts([penalties.text, notice.text])
    contexts = [ScoredChunk(penalties, 1.0), ScoredChunk(notice, 0.5)]
    question = "How much can a seller be fined?"  # the toy law says "civil penalty", never "fine"
    assert "They state no amount" in ExtractiveGenerator(lambda c: stats, loose).generate(question, contexts).text
    glossary = Glossary.of({"civil penalty": ["fine", "fined"]})
    answer = ExtractiveGenerator(lambda c: stats, loose, glossary=lambda c: glossary).generate(question, contexts)
    assert not answer.refused and "$500" in answer.text
    # A phrasing the law does use keeps its own words, and a clause holding the law's words for it
    # holds it too: "traders" (the toy law's word elsewhere) is held by the penalty's "seller".
    stats = TermStats.from_texts([penalties.text, notice.text, "Traders keep records."])
    question = "How much would the bill be for traders?"
    assert "They state no amount" in ExtractiveGenerator(lambda c: stats, loose).generate(question, contexts).text
    sellers = Glossary.of({"seller": ["traders"]})
    answer = ExtractiveGenerator(lambda c: stats, loose, glossary=lambda c: sellers).generate(question, contexts)
    assert not answer.refused and "$500" in answer.text
    # Names parted by commas are each the law's words on their own: the penalty names the seller,
    # not the importer, and still holds "traders".
    stats = TermStats.from_texts([penalties.text, notice.text, "Traders keep records.", "Importers keep records."])
    either = Glossary.of({"importer, seller": ["traders"]})
    answer = ExtractiveGenerator(lambda c: stats, loose, glossary=lambda c: either).generate(question, contexts)
    assert not answer.refused and "$500" in answer.text


def test_an_abbreviation_the_law_never_writes_is_bound_by_its_long_form():
    from core.lexicon import Lexicon

    loose = BINDING_ONLY
    fees = make_chunk(
        "Toy Code § 1-105",
        "§ 1-105 Fees. A data protection impact assessment is filed for a fee of $300. The data protection "
        "impact assessment is reviewed yearly. Each data protection impact assessment lists its owner.",
    )
    stats = TermStats.from_texts([fees.text])
    contexts = [ScoredChunk(fees, 1.0)]
    question = "How much does filing a DPIA cost?"  # the toy law never writes "DPIA"
    assert "They state no amount" in ExtractiveGenerator(lambda c: stats, loose).generate(question, contexts).text
    lexicon = Lexicon.from_texts([fees.text])
    assert lexicon.abbreviations(question) == [("DPIA", "data protection impact assessment")]
    answer = ExtractiveGenerator(lambda c: stats, loose, lexicon=lambda c: lexicon).generate(question, contexts)
    assert not answer.refused and "$300" in answer.text


def test_sentences_are_credited_with_the_laws_words_for_a_users_phrase_the_law_never_uses():
    from core.glossary import Glossary

    informs = make_chunk(
        "Toy Code § 1-106",
        "§ 1-106 Disclosure. Sellers shall inform natural persons that they interact directly with an automated system.",
    )
    prices = make_chunk("Toy Code § 1-107", "§ 1-107 Prices. Sellers shall tell buyers the price before each sale.")
    stats = TermStats.from_texts([informs.text, prices.text])
    contexts = [ScoredChunk(prices, 1.0), ScoredChunk(informs, 0.9)]
    question = "Do sellers have to tell buyers they are chatting with a bot?"
    glossary = Glossary.of({"interact directly with natural persons": ["chatting with a bot"]})
    generator = ExtractiveGenerator(lambda c: stats, BINDING_ONLY, glossary=lambda c: glossary)
    found = generator.candidates(question, contexts)
    assert "bot" not in found.weights and {"interact", "natur"} <= set(found.weights)
    column = SENTENCE_FEATURES.index("terms")
    terms = {found.chunks[s.rank].label: found.features[i, column] for i, s in enumerate(found.sentences)}
    assert terms["Toy Code § 1-106"] > terms["Toy Code § 1-107"]
    # without the glossary the user's words count, and the price rule holds more of them
    plain = ExtractiveGenerator(lambda c: stats, BINDING_ONLY).candidates(question, contexts)
    assert "bot" in plain.weights


def test_a_chunk_that_is_one_item_of_a_list_is_read_with_its_provisions_heading():
    loose = BINDING_ONLY
    lead_in = make_chunk(
        "Toy Code § 1-108(1)",
        "1. Sellers may trial widgets in shops outside sandboxes only where the following conditions are met:",
        heading="Trials of widgets in shops outside sandboxes",
    )
    item = make_chunk(
        "Toy Code § 1-108(1)(f)",
        "(f) it does not last longer than six months;",
        heading="Trials of widgets in shops outside sandboxes",
    )
    stats = TermStats.from_texts([lead_in.text, item.text])
    question = "How long can a trial of widgets in shops outside a sandbox run?"
    answer = ExtractiveGenerator(lambda c: stats, loose).generate(question, [ScoredChunk(item, 1.0)])
    assert not answer.refused and "six months" in answer.text
    # without the heading nothing says what the six months are of
    bare = replace(item, heading="")
    assert ExtractiveGenerator(lambda c: stats, loose).generate(question, [ScoredChunk(bare, 1.0)]).refused


def test_an_items_closeness_to_the_question_is_also_read_after_its_heading():
    from core.extractive import _sentences

    class Vectors:  # "about trials" when the text says so, "about something else" otherwise
        def get(self, texts):
            return np.array([[1.0, 0.0] if "Trials" in t else [0.0, 1.0] for t in texts], dtype=np.float32)

    item = make_chunk("Toy Code § 1-108(1)(f)", "(f) it does not last longer than six months;", heading="Trials")
    sentences = _sentences([item])
    generator = ExtractiveGenerator(lambda c: TermStats.from_texts([item.text]), sentence_vectors=Vectors())
    query = np.array([1.0, 0.0], dtype=np.float32)
    cosines = np.zeros(len(sentences), dtype=np.float32)
    read = generator._with_headings(sentences, [item], cosines, query, {0: frozenset({"trial"})})
    assert read is not None and float(read.max()) == 1.0
    assert generator._with_headings(sentences, [item], cosines, query, {}) is cosines  # no titled chunk


def test_a_sentence_is_also_read_with_the_titles_of_the_units_it_cites():
    """"(a) Chapters I and II shall apply from …" is about prohibited practices (Chapter II): its
    closeness to "when do the bans apply?" is read with the cited chapter's title too."""
    from core.extractive import _sentences

    class Vectors:  # "about bans" when the text names them, "about something else" otherwise
        def get(self, texts):
            return np.array([[1.0, 0.0] if "Prohibited" in t else [0.0, 1.0] for t in texts], dtype=np.float32)

    item = make_chunk("Toy Code § 9(a)", "(a) Chapters I and II shall apply from six months after entry into force;")
    cited = replace(item, references="Chapter I: General provisions; Chapter II: Prohibited practices")
    generator = ExtractiveGenerator(lambda c: TermStats.from_texts([item.text]), sentence_vectors=Vectors())
    query = np.array([1.0, 0.0], dtype=np.float32)
    read, _ = generator._cosines(_sentences([cited]), [cited], query)
    assert read is not None and float(read.max()) == 1.0
    bare, _ = generator._cosines(_sentences([item]), [item], query)  # no titles stored: the text alone
    assert bare is not None and float(bare.max()) == 0.0


def test_a_value_is_bound_to_a_subject_named_in_the_laws_words_the_glossary_gives():
    """"how long can the pilot run?": the law says "testing in real world conditions" where users say
    "the pilot" (a word the law uses once, elsewhere), so the period of the testing clause is about it."""
    from core.glossary import Glossary

    item = make_chunk(
        "Toy Code § 1-160(4)(f)",
        "(f) the testing in real world conditions does not last longer than six months;",
        heading="Testing in real world conditions",
    )
    other = make_chunk("Toy Code § 1-170", "Member States may run pilots of regulatory sandboxes for widget sellers.")
    stats = TermStats.from_texts([item.text, other.text, "The seller sells widgets."])
    contexts = [ScoredChunk(item, 1.0), ScoredChunk(other, 0.5)]
    glossary = Glossary.of({"testing in real world conditions": ["the pilot"]})
    answer = ExtractiveGenerator(lambda c: stats, glossary=lambda c: glossary).generate("how long can the pilot run?", contexts)
    assert not answer.refused and "six months" in answer.text
    # without the glossary nothing says the pilot is the testing: no period is stated about it
    assert ExtractiveGenerator(lambda c: stats).generate("how long can the pilot run?", contexts).refused


def test_a_comparison_is_answered_about_both_sides():
    from core.extractive import _Side, _speaks_of

    importer = make_chunk(
        "Toy Code § 1-109(1)",
        "(1) ‘importer’ means a seller established in the city that places on the market a widget made abroad;",
    )
    distributor = make_chunk(
        "Toy Code § 1-109(2)",
        "(2) ‘distributor’ means a seller in the supply chain, other than the maker or the importer, that sells a widget;",
    )
    stats = TermStats.from_texts([importer.text, distributor.text, "The maker sells widgets."])
    contexts = [ScoredChunk(distributor, 1.0), ScoredChunk(importer, 0.2)]
    lead_only = ExtractiveGenerator(lambda c: stats, ExtractiveConfig(follow_share=0.999))  # no other follower
    answer = lead_only.generate("importer vs distributor, what's the difference?", contexts)
    assert "‘distributor’ means" in answer.text and "‘importer’ means" in answer.text
    # a definition speaks only of what it defines, though it names the other side
    importer_side = _Side({"importer": 1.0}, {})
    assert not _speaks_of(distributor.text, frozenset({"importer", "distributor", "seller"}), importer_side)
    assert _speaks_of("Importers shall keep records.", frozenset({"importer", "keep", "record"}), importer_side)
    # not a comparison: the lead alone
    assert "‘importer’ means" not in lead_only.generate("What is a distributor?", contexts).text


def test_each_defined_side_of_a_comparison_is_answered_by_its_definition():
    """"historical data vs test data …, and when may we use test data?": the rule that names both
    (§ 5-302(b)) leads, and each side's definition is quoted too, beside the rule's other sentence."""
    rule = make_chunk(
        "Toy Code § 1-302(b)",
        "A seller may rely on an audit that uses test data if insufficient historical data is available. "
        "If an audit uses test data, the summary must explain why historical data was not used.",
    )
    historical = make_chunk("Toy Code § 1-300(1)", "“Historical data” means data collected during a seller's own sales.")
    test = make_chunk("Toy Code § 1-300(2)", "“Test data” means data used to conduct an audit that is not historical data.")
    stats = TermStats.from_texts([rule.text, historical.text, test.text, "The maker sells widgets to buyers."])
    contexts = [ScoredChunk(rule, 2.0), ScoredChunk(historical, 0.5), ScoredChunk(test, 0.5)]
    answer = ExtractiveGenerator(lambda c: stats).generate(
        "What's the difference between historical data and test data for an audit, and when may we use test data?", contexts
    )
    assert "insufficient historical data" in answer.text
    assert "“Historical data” means" in answer.text and "“Test data” means" in answer.text


def test_a_question_like_one_the_law_was_found_not_to_answer_is_declined_with_it():
    """Precedents the law does not answer (core/precedents.py): the nearest provision quoted back would
    read as an answer to "do sellers need insurance?"; a question unlike it is answered as before."""
    from core.precedents import Precedent, Precedents

    embed = HashingEmbedder(dim=256).embed_queries
    precedents = Precedents([], [Precedent("do sellers need liability insurance for widgets", answerable=False)], embed)
    stats = TermStats.from_texts(sc.chunk.text for sc in scored())
    generator = ExtractiveGenerator(lambda c: stats, unanswered=lambda collection: precedents)
    like = "Do sellers need liability insurance for their widgets?"
    declined = generator.generate(like, scored(), query_vector=embed([like])[0])
    assert declined.refused
    assert "They were found not to answer a question like it: “do sellers need liability insurance for widgets”" in declined.text
    other = "How many business days before selling must a seller notify buyers?"
    assert not generator.generate(other, scored(), query_vector=embed([other])[0]).refused


def test_a_question_asking_for_a_value_the_law_states_is_not_declined_by_a_yes_no_precedent_near_it():
    """"How old can the bias audit be before we have to stop using the tool?" beside the unanswered
    "does the law require us to stop using the tool if the audit shows bias?": the law states the
    audit's age, so the value is quoted. Asking whether the law sets a value at all ("is there a
    deadline …?") and the precedent itself are still declined."""
    from core.precedents import Precedent, PrecedentConfig, Precedents

    embed = HashingEmbedder(dim=256).embed_queries
    unanswered = "must a seller stop selling widgets if buyers complain about the notice?"
    asked = "how many business days before selling must a seller notify buyers, or stop selling widgets?"
    whether = "is there a deadline for a seller to notify buyers, or stop selling widgets?"
    nearest = min(float(embed([q])[0] @ embed([unanswered])[0]) for q in (asked, whether))
    config = PrecedentConfig(min_decline_similarity=min(nearest, 0.99))
    precedents = Precedents([], [Precedent(unanswered, answerable=False)], embed, config)
    stats = TermStats.from_texts(sc.chunk.text for sc in scored())
    generator = ExtractiveGenerator(lambda c: stats, unanswered=lambda collection: precedents)
    assert all(precedents.declined(embed([q])[0]) is not None for q in (asked, whether))
    answer = generator.generate(asked, scored(), query_vector=embed([asked])[0])
    assert not answer.refused and "ten business days" in answer.text
    assert "found not to answer" in generator.generate(whether, scored(), query_vector=embed([whether])[0]).text
    assert generator.generate(unanswered, scored(), query_vector=embed([unanswered])[0]).refused


def test_a_question_asking_what_a_defined_term_means_is_answered_by_its_definition_not_declined():
    """An unanswered precedent about a defined term ("does the reviewer need a licence?") must not take
    the question what the term means: the law's definition answers that."""
    from core.precedents import Precedent, PrecedentConfig, Precedents

    embed = HashingEmbedder(dim=256).embed_queries
    licence = "does the reviewer need some kind of licence?"
    asked = "what counts as a reviewer?"
    # close enough to decline both questions, as a sentence model can find them
    config = PrecedentConfig(min_decline_similarity=min(float(embed([asked, licence])[0] @ embed([licence])[0]), 0.99))
    precedents = Precedents([], [Precedent(licence, answerable=False)], embed, config)
    definitions = make_chunk(
        "Toy Code § 1-101", "The term “reviewer” means a person who is not employed by the widget maker.",
        heading="Definitions — Reviewer",
    )
    contexts = [ScoredChunk(definitions, 1.0), *scored()[1:]]
    stats = TermStats.from_texts(sc.chunk.text for sc in contexts)
    generator = ExtractiveGenerator(lambda c: stats, unanswered=lambda collection: precedents)
    assert precedents.declined(embed([asked])[0]) is not None
    answer = generator.generate(asked, contexts, query_vector=embed([asked])[0])
    assert not answer.refused and "“reviewer” means" in answer.text
    assert generator.generate(licence, contexts, query_vector=embed([licence])[0]).refused


def test_a_follow_up_is_declined_for_a_place_only_when_it_names_the_place_itself():
    from core.types import Turn

    generator = toy_generator()
    history = [Turn("user", "Must our seller in Manhattan notify buyers?"), Turn("assistant", "Yes.")]
    follow_up = "Must our seller in Manhattan notify buyers? and the civil penalty?"
    answer = generator.generate(follow_up, scored(), history)
    assert not answer.refused and "$500" in answer.text
    assert generator.generate("Must our seller in Manhattan notify buyers?", scored()).refused


def test_a_short_follow_up_leads_with_a_sentence_naming_what_it_asks_anew():
    from core.types import Turn

    generator = toy_generator()
    earlier = "Who may carry out the widget audit, and can our own employees be the independent reviewer?"
    history = [Turn("user", earlier), Turn("assistant", "An independent reviewer.")]
    answer = generator.generate(f"{earlier} and the penalties?", scored(), history)
    assert answer.text.startswith("Under Toy Code § 1-103")


def test_a_follow_up_naming_the_fines_leads_with_the_amount_its_provision_heading_names():
    """"and the fines?" after a question about an audit asks how much: the amount in the provision
    headed "Fines" answers, not the audit clause that only mentions fines; the audit's words from the
    question before do not have to be in the amount's clause."""
    from core.types import Turn

    mentions = make_chunk(
        "Toy Code § 1-108",
        "A seller whose widget audit is late shall be subject to fines in accordance with § 1-109.",
        heading="Widget audit procedure",
    )
    amount = make_chunk(
        "Toy Code § 1-109",
        "Non-compliance with this chapter shall be subject to administrative sanctions of up to $5 000 per day.",
        heading="Fines",
    )
    stats = TermStats.from_texts([mentions.text, amount.text])
    earlier = "Must our seller do a widget audit every year?"
    history = [Turn("user", earlier), Turn("assistant", "Yes.")]
    answer = ExtractiveGenerator(lambda c: stats).generate(
        f"{earlier} and the fines?", [ScoredChunk(mentions, 1.0), ScoredChunk(amount, 0.9)], history
    )
    assert answer.text.startswith("Under Toy Code § 1-109 (Fines)"), answer.text


def test_a_follow_up_names_its_topic_in_the_laws_words_too():
    """"and do we have to tell staff?": the glossary's law words for it ("inform the affected workers")
    name the topic as well as the word "staff" does, which here only speaks of another body's staff."""
    from core.glossary import Glossary
    from core.types import Turn

    other = make_chunk("Toy Code § 1-110", "The staff of the widget board shall observe professional secrecy.")
    duty = make_chunk("Toy Code § 1-111", "Before using a widget at work, sellers shall inform the affected workers of its use.")
    stats = TermStats.from_texts([other.text, duty.text])
    glossary = Glossary.of({"inform the affected workers": ["tell staff"]})
    vectors = _VectorsByText("inform", 0.9, elsewhere=0.3)  # the duty is nearer in meaning; "staff" is not in it
    generator = ExtractiveGenerator(lambda c: stats, sentence_vectors=vectors, glossary=lambda c: glossary)
    earlier = "Is our widget for scoring people risky?"
    history = [Turn("user", earlier), Turn("assistant", "Yes.")]
    contexts = [ScoredChunk(other, 1.0), ScoredChunk(duty, 0.9)]
    toward = np.array([1.0, 0.0], dtype=np.float32)
    answer = generator.generate(f"{earlier} and do we have to tell staff?", contexts, history, query_vector=toward)
    assert answer.text.startswith("Under Toy Code § 1-111"), answer.text


def test_a_heading_joined_to_its_sentence_is_named_not_quoted():
    """"(b) Test Data. Test data may be used ...": a heading the provision's name already gives is not
    quoted again as if it were part of the rule; one that says more than the name is."""
    chunk = make_chunk(
        "Toy Code § 1-104",
        "(a) Data. A widget audit must use historical data of the seller. (b) Test Data. Test data may be used "
        "for the widget audit if insufficient historical data is available.",
        heading="Data; Test Data",
    )
    stats = TermStats.from_texts([chunk.text])
    asked = "Can test data be used for the widget audit?"
    answer = ExtractiveGenerator(lambda c: stats).generate(asked, [ScoredChunk(chunk, 1.0)])
    assert "Test Data. Test" not in answer.text and "Data. A widget" not in answer.text, answer.text
    assert [c.quote[:14] for c in answer.citations] == ["A widget audit", "Test data may "]
    assert all(c.quote in chunk.text for c in answer.citations)  # still verbatim
    # the heading's enumerator still narrows the citation
    text = "(b) Test Data. Test data may be used for the widget audit if no data exists."
    item = make_chunk("Toy Code § 1-105", text, heading="Test Data")
    alone = ExtractiveGenerator(lambda c: TermStats.from_texts([item.text])).generate(asked, [ScoredChunk(item, 1.0)])
    assert alone.text.startswith("Under Toy Code § 1-105(b) (Test Data): “Test data may be used"), alone.text
    # a heading that names what the provision's name does not stays in the quote
    listed = make_chunk(
        "Toy Annex I(2)", "2. Critical widgets: widgets used to control water or gas supply.", heading="Risky widgets"
    )
    kept = ExtractiveGenerator(lambda c: TermStats.from_texts([listed.text])).generate(
        "Are widgets that control water supply risky?", [ScoredChunk(listed, 1.0)]
    )
    assert "“2. Critical widgets: widgets used" in kept.text, kept.text


def test_a_comparison_of_two_definitions_worded_alike_quotes_both():
    """Two definitions of the same shape ("a person ... that develops" / "a person ... using") are no
    near-duplicates when the difference between them is what is asked."""
    provider = make_chunk(
        "Toy Act Art. 3(3)",
        "(3) ‘provider’ means a natural or legal person, public authority, agency or other body established in the city "
        "that develops a widget for sale in shops, markets or stalls, whether for payment or free of charge;",
    )
    deployer = make_chunk(
        "Toy Act Art. 3(4)",
        "(4) ‘deployer’ means a natural or legal person, public authority, agency or other body established in the city "
        "that uses a widget for sale in shops, markets or stalls, whether for payment or free of charge;",
    )
    duty = make_chunk("Toy Act Art. 9", "The provider shall keep records of widgets sold.")
    stats = TermStats.from_texts([provider.text, deployer.text, duty.text, "The seller sells widgets."])
    contexts = [ScoredChunk(deployer, 1.0), ScoredChunk(duty, 0.6), ScoredChunk(provider, 0.2)]
    lead_only = ExtractiveGenerator(lambda c: stats, ExtractiveConfig(follow_share=0.999))
    answer = lead_only.generate("provider vs deployer - what's the difference?", contexts)
    # the lead defines one side: the other side's definition is its match, not a duty naming it
    assert "‘deployer’ means" in answer.text and "‘provider’ means" in answer.text
    assert "keep records" not in answer.text
    assert "‘provider’ means" not in lead_only.generate("What is a deployer?", contexts).text


def test_sides_sharing_a_word_are_told_apart_by_the_words_they_do_not_share():
    """"selection rate vs scoring rate": both sides say "rate"; counted, the selection rate's
    definition would speak of the scoring rate too (a rare word weighs most) and only one is quoted."""
    selection = make_chunk("Toy Code § 1-300(3)", "“Selection rate” means the rate at which buyers are selected.")
    scoring = make_chunk("Toy Code § 1-300(4)", "“Scoring rate” means the rate at which buyers score above the median.")
    # "select" and "score" are common in the toy law, "rate" is rare: it weighs most in each side
    common = [f"Seller {n} may select and score buyers." for n in range(8)]
    stats = TermStats.from_texts([selection.text, scoring.text, *common])
    contexts = [ScoredChunk(selection, 1.0), ScoredChunk(scoring, 0.2)]
    lead_only = ExtractiveGenerator(lambda c: stats, ExtractiveConfig(follow_share=0.999))
    answer = lead_only.generate("selection rate vs scoring rate — what's the difference?", contexts)
    assert "“Selection rate” means" in answer.text and "“Scoring rate” means" in answer.text


def test_a_side_named_in_a_users_words_is_answered_by_the_parallel_clause_in_the_laws_words():
    """"How's notifying outside applicants different from notifying employees up for promotion?": the
    law's notice rule says "candidate for employment" (its "applicants" are those of an audit's
    sample), and answers both sides in parallel clauses of one section, each a lead-in with its list.
    Each side's clause is quoted whole, not an audit sentence that happens to say "applicants"."""
    from core.glossary import Glossary

    candidates = make_chunk(
        "Toy Code § 1-304(b)",
        "(b) A seller may notify a candidate for employment by doing any of the following:\n"
        "(1) Post it on the careers page of its website;\n(2) Mail the notice to outside candidates for employment.",
        heading="Notice.",
    )
    employees = make_chunk(
        "Toy Code § 1-304(c)",
        "(c) A seller may notify an employee up for promotion by doing any of the following:\n"
        "(1) Put it in a written policy;\n(2) Put it in a job posting.",
        heading="Notice.",
    )
    audit = make_chunk("Toy Code § 1-301", "An audit must count the outside applicants selected by the widget tool.")
    stats = TermStats.from_texts([candidates.text, employees.text, audit.text, "Sellers sell widgets to buyers."])
    contexts = [ScoredChunk(employees, 2.0), ScoredChunk(audit, 1.0), ScoredChunk(candidates, 0.5)]
    glossary = Glossary.of({"candidates for employment": ["applicants"]})
    generator = ExtractiveGenerator(
        lambda c: stats, ExtractiveConfig(follow_share=0.999), glossary=lambda c: glossary
    )
    question = "How's notifying outside applicants different from notifying employees up for promotion?"
    answer = generator.generate(question, contexts)
    assert "written policy" in answer.text and "careers page of its website" in answer.text
    assert "outside applicants selected" not in answer.text
    # without the law's words for "applicants" the audit sentence is the side's only match
    plain = ExtractiveGenerator(lambda c: stats, ExtractiveConfig(follow_share=0.999))
    assert "careers page" not in plain.generate(question, contexts).text


def test_a_sides_list_item_is_quoted_as_its_list():
    """The notice rule for candidates is the lead-in with its items, not the one item that best names
    them ("(2) Mail the notice to candidates"): the lead-in speaking of the side comes instead."""
    from core.extractive import ExtractiveGenerator, _Candidates, _Sentence

    lead_in = ExtractiveGenerator._list_lead_in

    text = "(b) A seller may notify a candidate by doing any of the following:\n(1) Post it online;\n(2) Mail it to a candidate."
    chunk = make_chunk("Toy Code § 1-304(b)", text)
    spans = [(0, text.index("\n")), (text.index("(1)"), text.index("\n(2)")), (text.index("(2)"), len(text))]
    sentences = [_Sentence(0, a, b, text[a:b], frozenset()) for a, b in spans]
    found = _Candidates([chunk], sentences, np.zeros((3, 1), dtype=np.float32), {})
    assert lead_in(found, 2, speaking=[2, 0]) == 0
    assert lead_in(found, 2, speaking=[2]) == 2  # the lead-in does not speak of the side
    assert lead_in(found, 0, speaking=[0, 2]) == 0  # no item


def test_each_thing_a_message_asks_is_answered():
    """"Who enforces the widget rules, and where are penalty cases heard?": among the sentences likely
    enough to follow the first, one about the second question is quoted too, on top of the number of
    quotes an answer has (here one)."""
    from core.extractive import question_parts

    assert question_parts("Who enforces it, and where are penalty cases heard?") == [
        "Who enforces it",
        "where are penalty cases heard?",
    ]
    assert question_parts("We sell widgets. Who enforces it? And how much is the fine?") == [
        "Who enforces it?",
        "how much is the fine?",
    ]
    assert question_parts("Must sellers and buyers keep records?") == ["Must sellers and buyers keep records?"]
    enforcement = make_chunk(
        "Toy Code § 1-140",
        "The widget commissioner enforces the widget rules. The widget commissioner may inspect widget rules "
        "records. The widget commissioner may publish widget rules guidance.",
    )
    hearings = make_chunk("Toy Code § 1-141", "Penalty cases are heard by the tribunal.")
    stats = TermStats.from_texts([enforcement.text, hearings.text, "The maker sells widgets to buyers."])
    contexts = [ScoredChunk(enforcement, 1.0), ScoredChunk(hearings, 0.9)]
    generator = ExtractiveGenerator(lambda c: stats, ExtractiveConfig(max_sentences=1, follow_share=0.01))
    answer = generator.generate("Who enforces the widget rules, and where are penalty cases heard?", contexts)
    assert "enforces the widget rules" in answer.text and "heard by the tribunal" in answer.text
    one_question = generator.generate("Who enforces the widget rules and who may inspect records?", contexts)
    assert "heard by the tribunal" not in one_question.text


def test_a_heading_the_pdf_wrapped_onto_a_second_line_is_not_quoted():
    """"Procedure for dealing with AI systems classified by the provider as" / "non-high-risk in
    application of Annex III": the second line is the heading's end, not the rule's start."""
    text = (
        "Article 8\nProcedure for widgets classified by the seller as\nnot risky in application of Annex II\n"
        "1. Where an authority considers that a widget classified by the seller as not risky is risky, it shall "
        "evaluate the widget."
    )
    chunk = make_chunk("Toy Act Art. 8(1)", text, heading="Procedure for widgets classified by the seller as")
    stats = TermStats.from_texts([text, "The seller sells widgets."])
    answer = ExtractiveGenerator(lambda c: stats).generate("What can an authority do about a widget classified as not risky?",
                                                            [ScoredChunk(chunk, 1.0)])
    assert "“1. Where an authority considers" in answer.text
    assert answer.citations[0].quote.startswith("1. Where")


def test_another_rules_value_of_the_asked_kind_is_not_quoted_beside_the_answer():
    """Once a clause states the asked period about what was asked, a sentence of the same chunk
    stating another period (another rule's) is not added to the answer: beside it, it misleads."""
    rules = make_chunk(
        "Toy Code § 1-105",
        "A seller shall post the opening hours no less than ten business days before opening a shop. If a buyer "
        "makes a written request about the widget inspection data, the seller shall answer the written request "
        "within 30 days.",
    )
    stats = TermStats.from_texts([rules.text, "Buyers may keep widget receipts."])
    answer = ExtractiveGenerator(lambda c: stats, BINDING_ONLY).generate(
        "How many days does a seller have to answer a written request about the widget inspection data?",
        [ScoredChunk(rules, 1.0)],
    )
    assert not answer.refused and "within 30 days" in answer.text
    assert "ten business days" not in answer.text
