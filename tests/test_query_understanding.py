"""Reading a user's question before search: spelling and abbreviations from the collection's own text
(core/lexicon.py), focus pieces (core/query.py), and its language (core/language.py)."""
from __future__ import annotations

import pytest

from core.language import LanguageDetector
from core.lexicon import Lexicon, one_edit
from core.query import QueryPlan, focus_pieces
from hypa_testkit.toy import toy_pipeline

TEXTS = [
    "An employer may not use an automated employment decision tools (“AEDT”) unless a bias audit was done.",
    "The bias audit must be done by an independent auditor. Audit results must be published.",
    "A provider of a general-purpose AI model shall keep documentation. The general-purpose AI model is "
    "placed on the market. Obligations for general-purpose AI providers apply.",
    "The quality management system shall be documented.",
]


@pytest.fixture(scope="module")
def lexicon() -> Lexicon:
    return Lexicon.from_texts(TEXTS)


def test_misspelt_words_are_read_as_the_collections_words(lexicon):
    read = lexicon.normalise("how oftn must a bias audti be done by an indepedent auditor?")
    assert ("audti", "audit") in read.corrections and ("indepedent", "independent") in read.corrections
    assert ("oftn", "often") in read.corrections  # an English word the law does not use
    assert "bias audit be done by an independent auditor" in read.text


def test_known_words_abbreviations_and_short_words_are_left_alone(lexicon):
    read = lexicon.normalise("Do SMEs and HR need a DPO for the ATS? hve we?")
    assert read.corrections == ()  # "SMEs" is no misspelling, "hve" too short to guess
    assert lexicon.normalise("Our tool is pure SaaS, built on OpenAI").corrections == ()  # written so on purpose
    assert lexicon.normalise("What must the employer publish?").changed is False
    # a capitalised word inside a sentence is a name, not a misspelling; at the start it may be one
    assert lexicon.normalise("Does an EU agency like Auditer need one?").corrections == ()
    assert ("Auditer", "Auditor") in lexicon.normalise("Auditer must be independent?").corrections


def test_abbreviations_are_expanded_from_the_text(lexicon):
    defined = lexicon.normalise("Do AEDTs need an audit?")
    assert defined.expansions == (("AEDTs", "automated employment decision tools"),)
    assert defined.text == "Do AEDTs (automated employment decision tools) need an audit?"
    # the answer is judged against the question without the long form (it would match everything)
    assert defined.corrected == "Do AEDTs need an audit?"
    initials = lexicon.normalise("What must a GPAI provider keep?")
    assert initials.expansions == (("GPAI", "general-purpose AI"),)
    already = lexicon.normalise("What must a GPAI (general-purpose AI) provider keep?")
    assert already.expansions == ()  # the question already says it


def test_a_phrase_seen_once_is_no_abbreviation(lexicon):
    # "quality management system" occurs once: too little to read QMS as it
    assert lexicon.normalise("Do we need a QMS?").expansions == ()


def test_chat_shortenings_are_read_as_words(lexicon):
    read = lexicon.normalise("wat r the penalties? do u need ppl's consent?")
    assert read.text == read.corrected == "what are the penalties? do you need people's consent?"
    # a shortening is not the nearest word by spelling ("recog" is not "recon")
    assert lexicon.normalise("is live facial recog allowed?").corrections == (("recog", "recognition"),)
    # a letter that numbers a point, and an upper-case letter, stay as written
    assert lexicon.normalise("What does point (r) of Article 5 say? R U sure?").corrections == ()
    assert lexicon.normalise("What about the u.s. and r&d?").corrections == ()  # inside abbreviations


def test_contractions_typed_without_the_apostrophe_are_read_as_contractions(lexicon):
    # the nearest words would be others: "arent" -> "agent", "dont" -> "done", "theyre" -> "there"
    read = lexicon.normalise("Dont we need it? arent they? theyre talking to a bot, whats next?")
    assert read.corrected == "Don't we need it? aren't they? they're talking to a bot, what's next?"
    # words that are words stay
    assert lexicon.normalise("it is its own thing, lets see").corrections == ()


def test_two_swapped_letters_are_the_likeliest_typo():
    from core.lexicon import _swapped

    lexicon = Lexicon.from_texts(["A label shall be attached. The seller is liable. The label is visible."])
    # "lable" is one edit from both; swapped letters are the commoner slip
    assert lexicon.normalise("where does the lable go?").corrected == "where does the label go?"
    assert _swapped("lable", "label") and not _swapped("lable", "liable") and not _swapped("label", "label")


def test_compounds_are_read_as_the_text_writes_them():
    lexicon = Lexicon.from_texts([
        "A deep fake is generated content. Deployers shall disclose deep fakes. Content moderation applies.",
        "Cybersecurity shall be ensured. Cybersecurity measures apply. Rules and tools, and tools. Process or product,"
        " process or service. Data processing.",
    ])
    split = lexicon.normalise("Do we have to label deepfakes?")
    assert split.corrections == (("deepfakes", "deep fakes"),)
    assert split.text == split.corrected == "Do we have to label deep fakes?"
    joined = lexicon.normalise("What cyber security duties are there?")
    assert joined.corrections == (("cyber security", "cybersecurity"),)
    assert joined.text == "What cybersecurity duties are there?"
    # parts the text puts together only once, or a stop word as a part, split nothing
    assert lexicon.normalise("Is contentmoderation needed?").corrections == ()
    assert lexicon.normalise("What about andtools?").corrections == ()  # "and" is a stop word
    # an English word is no compound ("process" + "ors" would pair as "process or")
    assert lexicon.normalise("Do data processors need one?").corrections == ()


def test_one_edit_covers_the_four_kinds_of_typo():
    edits = one_edit("audit")
    assert {"audi", "uadit", "audot", "audits"} <= edits


@pytest.mark.parametrize(
    ("question", "pieces"),
    [
        ("Is an AI tool that screens and ranks CVs considered high-risk under the AI Act?",
         ["an AI tool that screens and ranks CVs", "Is an AI tool that screens and ranks CVs considered high-risk"]),
        ("Do we legally have to train our staff on AI under the AI Act, even though we only use AI tools?",
         ["Do we legally have to train our staff on AI", "even though we only use AI tools"]),
        ("Is it banned to use dark patterns that push users into buying stuff?",
         ["use dark patterns that push users into buying stuff"]),
        ("What are the penalties?", []),
        # the clause that asks is kept even with one key word: it is what the question is about
        ("What are the penalties if we use a widget without a safety label?",
         ["What are the penalties", "if we use a widget without a safety label"]),
        ("how much is the fine for breaking the law?", ["how much is the fine for breaking"]),
        # "is that ...?" after a comma asks about the clause before; a pronoun is no piece of its own
        ("we use AI to screen CVs, is that high risk?", ["we use AI to screen CVs", "is that high risk"]),
        # a condition is a clause of its own, with or without a comma before it
        ("Which fine applies to a seller when widgets ship without the safety label?",
         ["Which fine applies to a seller", "when widgets ship without the safety label"]),
    ],
)
def test_focus_pieces(question, pieces):
    assert focus_pieces(question) == pieces


def test_a_plan_keeps_corrections_out_of_nothing():
    plan = QueryPlan(text="What is an AEDT?")
    assert plan.question == plan.text and plan.pieces == ()


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("¿Necesito una auditoría de sesgo antes de usar esta herramienta?", "es"),
        ("Muss ich meine Bewerber informieren, dass KI eingesetzt wird?", "de"),
        ("Est-ce que je dois informer les candidats?", "fr"),
        ("Quali sono le sanzioni previste dal regolamento?", "it"),
        ("how oftn must a bias audti be done", "en"),
        ("Art. 99 fines?", "en"),  # too short to judge: English
        ("AEDT notice requirements NYC employers", "en"),
        ("We're a Dutch bank. Do we need a FRIA?", "en"),
    ],
)
def test_language(text, code):
    assert LanguageDetector().detect(text).code == code


def test_an_offline_answer_to_a_question_in_another_language_asks_for_english(tmp_path):
    pipeline = toy_pipeline(tmp_path)
    pipeline.language = LanguageDetector()
    result = pipeline.answer("¿Cuánto tiempo antes debo notificar a los compradores?")
    assert result.answer.refused and result.contexts == [] and result.queries == []
    assert "English" in result.answer.text and "Spanish" in result.answer.text
    assert result.answer.note == "language: es"
    # English questions are answered as before
    assert not pipeline.answer("How many business days before selling must a seller notify buyers?").answer.refused
