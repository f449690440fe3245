"""Questions that ask for a value (how long, how much, an average, a sentiment) get one or a refusal."""
from __future__ import annotations

import pytest

from core.answer_type import AskedValue, asked_value, asks_whether_set, states_value
from core.extractive import ExtractiveGenerator
from core.termstats import TermStats
from hypa_testkit.toy import make_chunk, scored, toy_generator


@pytest.mark.parametrize(
    ("question", "kinds", "subject"),
    [
        ("How long must the summary stay posted?", (("duration",),), "summari"),
        ("How many business days before use must candidates be notified?", (("duration",),), "candid"),
        ("Within how many days will the requested information be provided?", (("duration",),), "request"),
        ("How many employees must a company have?", (("count",),), None),  # "a company" is anyone
        ("how much can a company be fined for giving the regulator wrong info?", (("money", "percentage"),), None),
        ("How many employees must a franchisee have?", (("count",),), "franchise"),
        ("How much is the civil penalty?", (("money", "percentage"),), "civil"),
        ("How much does an independent audit cost?", (("money",),), "independ"),
        ("How much can the city fine us?", (("money", "percentage"),), None),  # who fines, not whose fine
        ("How much notice do candidates get before use?", (("duration",),), "candid"),  # a period, not money
        ("how much heads-up do candidates need?", (("duration",),), "candid"),
        ("What percentage of the data may be excluded?", (("percentage",),), None),
        ("What minimum accuracy percentage must the tool reach?", (("percentage",),), None),
        ("What fee does the department charge for an audit?", (("money",),), None),
        ("What is the average age of the male applicants?", (("statistic",), ("age",)), None),
        ("What's the average age of the male applicants?", (("statistic",), ("age",)), None),  # "what's" too
        ("whats the median score?", (("statistic",),), None),
        ("What’s the maximum number of people we can enrol as test subjects?", (("count",),), None),
        ("what is the minimum number of staff who must confirm a match?", (("count",),), None),
        ("What was the general sentiment of the comments?", (("opinion",),), None),
        ("How often must the tool be audited?", (("duration",),), "tool"),
        ("For how many years does the vendor provide historical data?", (("duration",),), "vendor"),
        ("How long does it take?", (("duration",),), None),  # a pronoun names no subject
        ("Do we need someone's approval, and how long does that take?", (("duration",),), None),  # "that" + verb
        ("How long does that review take?", (("duration",),), "review"),
        ("We stopped last month. How long must the summary stay up?", (("duration",),), "summari"),
        ("Is there a fee, and if so how much is it?", (("money", "percentage"),), None),
        ("Is there a rule to keep audit records for some number of years?", (("duration",),), None),
    ],
)
def test_asked_value_kind_and_subject(question: str, kinds, subject):
    asked = asked_value(question)
    assert asked is not None
    assert asked.kinds == kinds
    assert asked.subject == subject


@pytest.mark.parametrize(
    "question",
    [
        "What is a bias audit?",
        "Who enforces the law?",
        "What is the purpose of the notice?",
        "What charges can the department bring?",  # charges brought, not a price
        "Does the law prohibit discrimination based on age?",  # mentions age, does not ask for one
        # asks whether to disclose the period, not for it
        "Do we need to put anything on our careers page about what data we collect and how long we keep it?",
    ],
)
def test_questions_that_ask_for_a_rule_ask_for_no_value(question: str):
    assert asked_value(question) is None


def test_the_words_that_ask_are_not_what_the_question_is_about():
    assert asked_value("For how many years does the vendor provide data?").words == {"mani", "year"}
    # The counted thing is what a count question is about, so it is not among the asking words.
    assert "employe" not in asked_value("How many employees must a company have?").words
    # What the percentage is of stays a key term.
    assert asked_value("What minimum accuracy percentage must the tool reach?").words == {"percentag"}


@pytest.mark.parametrize(
    ("text", "kind", "states"),
    [
        ("no less than 10 business days before such use", "duration", True),
        ("for a period ending 10 years after", "duration", True),
        ("at least six months after its latest use", "duration", True),
        ("pursuant to § 20-871 and § 5-301", "duration", False),
        ("pursuant to § 20-871 and § 5-301", "count", False),  # section numbers are not quantities
        ("a civil penalty of not more than $500", "money", True),
        ("fines of up to 35 000 000 EUR", "money", True),
        ("less than 2% of the data", "percentage", True),
        ("Male 92 54.3% 1.00", "count", True),
        # numbers that name a provision, an item or a category count nothing
        ("obligations pursuant to Article 49 and Annex VIII", "count", False),
        ("persons of any component 1 category", "count", False),
        # a list's enumerators and a provision's paragraph number count nothing
        ("(1) Calculate the median score for the full sample of applicants;", "count", False),
        ("as required by § 5-301(c)(1) and Article 6(1)", "count", False),
        ("1. Such tool has been the subject of a bias audit", "count", False),
        ("the audit covered; 2. The tool", "count", False),
        ("fewer than 250 employees.", "count", True),
        ("at least 15 members", "count", True),
        ("Calculate the median score for the full sample", "statistic", True),
        ("employment agency", "age", False),  # "age" inside a word is not an age
        ("applicants 40 years of age or older", "age", True),
        ("commenters supported the change", "opinion", True),
        ("tools that automate, support or replace decisions", "opinion", False),
    ],
)
def test_states_value(text: str, kind: str, states: bool):
    assert states_value(text, AskedValue(((kind,),), frozenset())) is states


def test_every_kind_group_must_be_stated():
    asked = asked_value("What is the average age of the applicants?")
    assert not states_value("the average score of the applicants", asked)
    assert states_value("the average age of the applicants is 40", asked)


# --- in the extractive generator (toy chunks: hypa_testkit/toy.py) --------------------------------


def test_value_question_is_answered_with_the_clause_that_states_it():
    answer = toy_generator().generate("How much is the civil penalty for a first violation?", scored())
    assert not answer.refused
    assert "$500" in answer.text


def test_value_the_provisions_do_not_state_is_refused():
    # The provisions talk about penalties, but never about an average one.
    answer = toy_generator().generate("What was the average civil penalty imposed on sellers?", scored())
    assert answer.refused and answer.citations == []
    # The refusal says what is missing, then where it looked.
    assert "don't address this question. They state no average for it." in answer.text
    assert "nearest provisions" in answer.text


def test_value_about_something_else_is_refused():
    # The provisions define the reviewer and the audit, but the only duration is the seller's notice period.
    answer = toy_generator().generate("How long does an independent reviewer have to finish a widget audit?", scored())
    assert answer.refused and answer.citations == []


def test_value_from_a_provision_that_never_names_the_subject_is_refused():
    # Ten business days is the seller's notice period; § 1-102 says nothing about reviewers.
    for_seller = toy_generator().generate("How many days before selling must a seller notify each buyer?", scored())
    assert not for_seller.refused and "ten business days" in for_seller.text
    for_reviewer = toy_generator().generate("How many days before selling must a reviewer notify each buyer?", scored())
    assert for_reviewer.refused


def test_a_period_for_keeping_something_else_is_not_the_answer():
    chunks = [
        make_chunk(
            "Toy Code § 2-101", "A seller must keep the summary of results posted for at least 6 months after its latest sale."
        ),
        make_chunk(
            "Toy Code § 2-102", "A seller shall keep each audit record for three years. Buyer data may be shared with a reviewer."
        ),
    ]
    stats = TermStats.from_texts(c.text for c in chunks)
    generator = ExtractiveGenerator(lambda collection: stats)
    assert asked_value("How long must a seller keep the buyer data we collect?").kept == {"buyer", "data"}
    assert asked_value("How long must a seller keep them?").kept == frozenset()  # a pronoun names nothing
    # what the asking sentence keeps, not another sentence
    assert asked_value("We keep a log of sales. How long must we retain buyer data?").kept == {"buyer", "data"}
    asked = asked_value("Do we have to keep the audit records for a certain period of time?")
    assert asked.kept == {"audit", "record"} and asked.words == {"certain", "period", "time"}  # only those ask
    assert asked_value("Must we keep logs for a certain period?").kept == {"log"}
    assert asked_value("Can we use the tool for some time before the audit?") is None  # no period asked
    records = generator.generate("How long must a seller keep the audit records?", scored(chunks))
    assert not records.refused and "three years" in records.text
    # shares "seller", "latest sale" and states 6 months, but about keeping the summary, not the data
    assert generator.generate("How long must a seller keep buyer data after its latest sale?", scored(chunks)).refused
    assert generator.generate("How long must a seller keep the summary posted?", scored(chunks)).text.count("6 months") == 1


def test_when_rules_apply_asks_for_a_date_and_keeps_its_subject():
    asked = asked_value("When do the prohibited AI practices rules start to apply?")
    assert asked is not None and asked.kinds == (("date", "duration"),)
    assert asked.words == {"start"}  # "prohibited AI practices rules" is what it is about
    assert states_value("shall apply from … [six months from the date of entry into force]", asked)
    assert states_value("This local law takes effect on January 1, 2023.", asked)
    assert not states_value("Providers shall keep the logs.", asked)
    # when a duty falls due: a moment or a period leads, and a rule saying neither may still answer
    due = asked_value("When must we notify candidates?")
    assert due is not None and due.kinds == (("moment", "duration", "date"),) and not due.required


@pytest.mark.parametrize(
    "question",
    ["What are the penalties?", "whats the fine if we use an AEDT without a bias audit?", "What’s the fine?",
     "What's the max fine for violating LL144?", "how much is the fine for breaking this law?",
     "and the fines?", "ok, what about penalties?", "what fine are we looking at if a regulator notices?",
     "what kind of penalty do we face?", "What could we be fined if we don't label our deepfake ads?"],
)
def test_asking_for_the_fine_asks_for_an_amount_but_does_not_require_one(question: str):
    # A court order or a warning may be the answer, so a provision stating no amount is not refused;
    # the penalty itself is what the question is about, not a word that asks.
    asked = asked_value(question)
    assert asked is not None and asked.kinds == (("money", "percentage"),)
    assert not asked.required
    assert not asked.words & {"fine", "penalti"}


@pytest.mark.parametrize(
    "question",
    ["ok, and at what point in the conversation does that have to be shown?", "when do we have to tell them?",
     "so when should we send the notice?", "How early must the notice go out?"],
)
def test_asking_when_a_duty_falls_due_asks_for_a_moment(question: str):
    asked = asked_value(question)
    assert asked is not None and asked.kinds == (("moment", "duration", "date"),) and not asked.required
    assert states_value("shall be provided at the latest at the time of the first interaction", asked)
    assert states_value("at least 10 business days before use of an AEDT", asked)
    assert not states_value("Providers shall keep the logs.", asked)


def test_how_quickly_asks_for_a_period_or_a_moment_and_requires_neither():
    asked = asked_value("ok and how quickly do we have to tell the Commission?")
    assert asked is not None and asked.kinds == (("duration", "moment"),) and not asked.required
    assert states_value("shall notify the Commission without delay and in any event within two weeks", asked)
    assert states_value("shall report it without undue delay", asked)
    # "when" that asks under what conditions, not when, asks for no value
    assert asked_value("when is an AI system high-risk?") is None


def test_is_there_a_value_asks_for_one():
    assert asked_value("Is there a fee to register the system?").kinds == (("money",),)
    assert asked_value("Is there a legal deadline for the notified body to decide?").kinds == (("duration",),)
    assert asked_value("Is there a 0.8 / four-fifths cutoff?") is not None
    assert asked_value("Is there any way to appeal?") is None


def test_more_ways_of_asking_for_a_number():
    assert asked_value("By what date does the AI Office have to publish the template?").kinds == (("date", "duration"),)
    assert asked_value("What is the required notice?") is None
    # a number inside an act's number counts nothing
    assert not states_value("Regulation (EC) No 765/2008 and Regulation (EU) 2016/679", AskedValue((("count",),), frozenset()))


@pytest.mark.parametrize(
    ("question", "whether"),
    [
        ("Is there a pass/fail cutoff for the audit?", True),
        ("Is there a fee for registering?", True),
        ("Does the law set a deadline for the notice?", True),
        ("How old can the bias audit be?", False),
        ("How much can a company be fined?", False),
    ],
)
def test_asks_whether_the_law_sets_a_value_at_all(question: str, whether: bool):
    assert asks_whether_set(question) is whether
