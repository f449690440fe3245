"""Glossaries: users' words read with the law's before search (core/glossary.py), loaded from the
manifest corpora and HYPA_GLOSSARY_DIR (bot/wiring.py), shown by `hypa glossary show`."""
from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from bot.corpus import load_manifest
from bot.serve_chat import ServeSetupError, warm_up
from bot.settings import Settings
from bot.wiring import Components, collection_glossaries
from core.errors import GlossaryError
from core.glossary import Glossary
from core.lexicon import Lexicon

CHATBOT = "AI systems intended to interact directly with natural persons"


@pytest.fixture
def glossary() -> Glossary:
    return Glossary.of({
        CHATBOT: ["chat bot", "virtual assistant"],
        "stop button": ["kill switch"],
        "employment section of its website": ["careers page"],
    })


@pytest.mark.parametrize(
    "question",
    [
        "Do users have to know they talk to a chatbot?",
        "Do users have to know they talk to a Chat-Bot?",
        "do users have to know they talk to chat bots?",
        "Is our virtual assistant covered?",
        "Is our virtual-assistants product covered?",
    ],
)
def test_a_phrasing_is_found_in_any_case_hyphenated_or_written_together_and_in_the_plural(glossary, question):
    text, expansions = glossary.expand(question)
    assert f"({CHATBOT})" in text
    assert [law for _, law in expansions] == [CHATBOT]


@pytest.mark.parametrize(
    ("phrasing", "question"),
    [
        ("train people", "Does the Act say anything about training the people who use it?"),
        ("tell staff", "Do we have to tell our staff first?"),
        ("use it internally", "We are using it internally only."),
        ("opt out", "Some candidates opted out."),
        ("didn't build", "We didn't build or change anything."),
    ],
)
def test_a_phrasing_is_found_in_its_verb_forms_and_with_a_determiner_between_its_words(phrasing, question):
    assert Glossary.of({"the law's words": [phrasing]}).expand(question)[1]


@pytest.mark.parametrize(
    ("phrasing", "question"),
    [
        ("fire", "Is a firewall an AEDT?"),  # a longer word
        ("EU rep", "Do we need an EU repository?"),  # an abbreviation takes a plural ending only
        ("train people", "Do we train new people?"),  # another word between
    ],
)
def test_inflected_phrasings_still_match_only_whole_words(phrasing, question):
    assert not Glossary.of({"the law's words": [phrasing]}).expand(question)[1]


def test_the_laws_words_follow_the_phrase_as_typed_and_the_rest_is_kept(glossary):
    text, expansions = glossary.expand("Need a kill switch and a careers page notice?")
    assert text == (
        "Need a kill switch (stop button) and a careers page (employment section of its website) notice?"
    )
    assert expansions == (("kill switch", "stop button"), ("careers page", "employment section of its website"))


@pytest.mark.parametrize(
    "question",
    [
        "Is the chatbotics lab covered?",  # part of a longer word
        "Is a skill switch needed?",  # "kill switch" inside "skill switch"
        "Do AI systems intended to interact directly with natural persons, like our chatbot, need a label?",
    ],
)
def test_no_expansion_inside_a_word_or_where_the_laws_words_are_already_there(glossary, question):
    assert glossary.expand(question) == (question, ())


def test_phrasings_the_text_keeps_using_are_left_out(glossary):
    text = "A chatbot is mentioned once. " + "The virtual assistant. " * 3
    kept = glossary.unused_in(text)
    by_law = {e.law: e.phrasings for e in kept.entries}
    assert by_law[CHATBOT] == ("chat bot",)  # used once in passing: still needs the law's words
    assert "virtual assistant" not in by_law[CHATBOT]
    only_used = Glossary.of({"penalty": ["fine"]}).unused_in("a fine; a fine; fines")
    assert not only_used and only_used.expand("what is the fine?") == ("what is the fine?", ())


def test_the_words_of_its_phrasings(glossary):
    assert glossary.words == frozenset({"chat", "bot", "virtual", "assistant", "kill", "switch", "careers", "page"})


def test_two_glossaries_add_up(glossary):
    more = Glossary.of({CHATBOT: ["bot", "chat bot"], "deployer": ["user of the system"]})
    merged = glossary + more
    by_law = {e.law: e.phrasings for e in merged.entries}
    assert by_law[CHATBOT] == ("chat bot", "virtual assistant", "bot")
    assert by_law["deployer"] == ("user of the system",)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("[terms\n", "cannot read the glossary"),
        ('terms = "chatbot"\n', "must map the law's words"),
        ('[terms]\n"stop button" = 3\n', "expected a list of phrasings"),
        ('[terms]\n"stop button" = ["kill switch", 4]\n', "expected a list of phrasings"),
        ('silent = "consent"\n', "must map what the law does not mention"),
        ('[silent]\n"consent" = [3]\n', "expected a list of phrasings"),
    ],
)
def test_a_broken_file_is_a_clear_error_naming_it(tmp_path, content, message):
    path = tmp_path / "mine.toml"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(GlossaryError, match=message) as raised:
        Glossary.read(path)
    assert str(path) in str(raised.value)


def test_a_lexicon_searches_with_the_laws_words_but_judges_the_users(glossary):
    lexicon = Lexicon.from_texts(["AI systems intended to interact directly with natural persons shall inform them."], glossary)
    normalised = lexicon.normalise("Does our chatbot have to say it is an AI?")
    assert normalised.text == f"Does our chatbot ({CHATBOT}) have to say it is an AI?"
    assert normalised.corrected == "Does our chatbot have to say it is an AI?"
    assert ("chatbot", CHATBOT) in normalised.expansions


SILENT = Glossary.of({}, {"candidates' consent": ["consent", "opt in"], "an AI officer": ["AI officer"]})


@pytest.mark.parametrize(
    ("asking", "retrieved", "topics"),
    [
        ("Do we need the candidates' consent?", "Notice shall be given.", ["candidates' consent"]),
        ("Must they OPT-IN, and do we need an AI officer?", "", ["candidates' consent", "an AI officer"]),
        # a provision found for the question uses the phrasing: the law is not silent on it
        ("Do we need consent for the test?", "Subjects have given informed consent.", []),
        ("Do we need an AI officer?", "Providers shall appoint an AI officer.", []),
        ("Is consentual data ok?", "", []),  # part of a longer word
        ("Who checks our logs?", "", []),
    ],
)
def test_a_question_about_what_the_law_never_mentions(asking, retrieved, topics):
    assert SILENT.silent_on(asking, retrieved) == topics


def test_silences_read_merge_and_are_checked_against_the_text(tmp_path):
    path = tmp_path / "mine.toml"
    path.write_text('[terms]\n"stop button" = ["kill switch"]\n[silent]\n"an AI officer" = ["AI officer", "chief AI officer"]\n')
    read = Glossary.read(path)
    assert [(s.topic, s.phrasings) for s in read.silences] == [("an AI officer", ("AI officer", "chief AI officer"))]
    merged = read + SILENT
    assert [(s.topic, s.phrasings) for s in merged.silences] == [
        ("an AI officer", ("AI officer", "chief AI officer")),
        ("candidates' consent", ("consent", "opt in")),
    ]
    assert merged.unused_in("the AI officer; the AI officer; the AI officer").silences == merged.silences
    assert merged.silence_phrasings_used_in("the chief AI officer signs") == {"an AI officer": ["AI officer", "chief AI officer"]}
    assert Glossary.of({}, {"x": ["y"]})  # a glossary of silences only is not empty


def test_the_shipped_silences_are_not_in_the_laws_text():
    """Where the corpora are at hand (../shared in CI), no shipped silence phrasing occurs in its
    law's text: the law is silent on every one."""
    from core.ingest.loaders import load_document

    mirror = Settings().corpus_mirror
    for corpus in load_manifest().corpora.values():
        files = [mirror / f.mirror_path for f in corpus.files] if mirror is not None else []
        if not files or not all(p.is_file() for p in files):
            pytest.skip(f"the {corpus.collection} corpus files are not at hand (HYPA_CORPUS_MIRROR)")
        text = "\n".join(load_document(path).text for path in files)
        glossary = Glossary.read(corpus.glossary_path())
        assert glossary.silences, corpus.collection
        assert glossary.silence_phrasings_used_in(text) == {}, corpus.collection


def test_the_shipped_glossaries_load_for_their_corpora():
    manifest = load_manifest()
    for corpus in manifest.corpora.values():
        path = corpus.glossary_path()
        assert path is not None and path.is_file(), corpus.collection
        glossary = Glossary.read(path)
        assert len(glossary.entries) >= 10
        raw = tomllib.loads(path.read_text(encoding="utf-8"))["terms"]
        assert all(phrasings and all(p.strip() for p in phrasings) for phrasings in raw.values())


@pytest.mark.parametrize(
    ("collection", "question", "laws_words"),
    [
        ("eu-ai-act", "which AI systems count as high-risk?", "classification rules for high-risk AI systems"),
        ("eu-ai-act", "Must we tell the applicants that AI is being used on them?", "subject to the use of the high-risk"),
        ("eu-ai-act", "and do we have to tell staff?", "workers' representatives and the affected workers"),
        ("eu-ai-act", "what do we have to publish about the data we trained it on?", "sufficiently detailed summary"),
        ("eu-ai-act", "what if it's obviously a parody sketch though?", "evidently artistic, creative, satirical"),
        ("eu-ai-act", "and what if the patient died?", "death of a person"),
        ("eu-ai-act", "It only reformats CVs. Is that still high-risk?", "shall not be considered to be high-risk"),
        ("eu-ai-act", "and if we cross that do we have to tell anyone? how fast?", "notify the Commission without delay"),
        ("eu-ai-act", "Who enforces the AI Act in each EU country?", "national competent authority"),
        ("eu-ai-act", "Once it's done, do we have to send it to anyone?", "authority of its results"),
        ("eu-ai-act", "If the regulator disagrees, what can they do?", "classified by the provider as non-high-risk"),
        ("eu-ai-act", "is a hand-coded rules engine (no ML) an AI system?", "rules defined solely by natural persons"),
        ("eu-ai-act", "Do we need a notified body, or can we self-assess?", "procedure based on internal control"),
        ("eu-ai-act", "The model we shipped doesn't actually comply. Now what?", "not in conformity with this Regulation"),
        ("eu-ai-act", "When did the banned practices start to bite?", "entry into force, shall apply from"),
        ("eu-ai-act", "is an ai that grades student essays high risk?", "evaluate learning outcomes"),
        ("eu-ai-act", "our AI voice agent makes sales calls, must it say it's AI?", "interact directly with natural persons"),
        ("eu-ai-act", "Can the Commission force us to pull our model off the market?", "withdraw or recall the model"),
        ("eu-ai-act", "our notified body refused to issue our certificate. can we challenge the decision?", "appeal procedure"),
        ("eu-ai-act", "Can we make an intern responsible for overseeing it?", "competence, training and authority"),
        ("eu-ai-act", "When do the high-risk obligations hit us?", "entry into force, shall apply from"),
        ("ll144", "does LL144 stop me from suing the employer myself?", "civil action, court of competent jurisdiction"),
        ("ll144", "can i ask them to evaluate me some other way?", "alternative selection process"),
        ("ll144", "where does that case get heard? Is it an actual court?", "office of administrative trials and hearings"),
        ("ll144", "ok and where would that get decided if we want to fight it?", "office of administrative trials and hearings"),
    ],
)
def test_the_shipped_glossaries_give_the_laws_words_for_plain_questions(collection: str, question: str, laws_words: str):
    path = load_manifest().corpora[collection].glossary_path()
    expanded, _ = Glossary.read(path).expand(question)
    assert laws_words in expanded


@pytest.mark.parametrize(
    ("collection", "question", "topic"),
    [
        ("eu-ai-act", "What's the maximum GDPR fine for skipping an impact assessment?", "fines under the GDPR"),
        ("eu-ai-act", "Under the AI Liability Directive, who carries the burden of proof?", "the AI Liability Directive"),
        ("eu-ai-act", "roughly what do compliance consultants charge for a readiness review?", "what consultants charge"),
        ("eu-ai-act", "Which GDPR lawful basis should we use to train on support chats?", "a lawful basis under the GDPR"),
        ("eu-ai-act", "which tools or vendors are best for bias testing?", "which tools or vendors to use"),
        ("ll144", "can you recommend an auditor for our bias audit?", "which auditors, tools or vendors to use"),
        ("ll144", "any data residency rules, do we keep it on US servers?", "where the data must be stored"),
        ("ll144", "if the impact ratio is under 0.8 do we have to pull the tool?", "a pass/fail threshold for the impact ratio"),
        ("ll144", "must we say why the AI screened them out?", "telling candidates their score or the reasons for a decision"),
    ],
)
def test_the_shipped_glossaries_name_what_their_law_is_silent_on(collection: str, question: str, topic: str):
    path = load_manifest().corpora[collection].glossary_path()
    assert Glossary.read(path).silent_on(question, "Penalties ... administrative fines") == [topic]


def _write(directory: Path, name: str, content: str) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / name).write_text(content, encoding="utf-8")


def test_own_glossaries_add_to_the_manifests_and_can_be_turned_off(tmp_path):
    own = tmp_path / "glossaries"
    _write(own, "ll144.toml", '[terms]\n"employment section of its website" = ["hiring portal"]\n')
    _write(own, "handbook.toml", '[terms]\n"paid time off" = ["PTO", "vacation"]\n')
    glossaries = collection_glossaries(Settings(data_dir=tmp_path))
    assert {"ll144", "eu-ai-act", "handbook"} <= glossaries.keys()
    ll144 = {e.law: e.phrasings for e in glossaries["ll144"].entries}
    assert "hiring portal" in ll144["employment section of its website"]
    assert "careers page" in ll144["employment section of its website"]  # the shipped phrasings stay
    assert collection_glossaries(Settings(data_dir=tmp_path, glossary=False)) == {}
    elsewhere = tmp_path / "elsewhere"
    _write(elsewhere, "handbook.toml", '[terms]\n"overtime" = ["extra hours"]\n')
    moved = collection_glossaries(Settings(data_dir=tmp_path, glossary_dir=elsewhere))
    assert "overtime" in {e.law for e in moved["handbook"].entries}


def _toy_components(tmp_path: Path, **settings) -> Components:
    from storage.embedded import EmbeddedIndex
    from storage.embedder import HashingEmbedder

    class WordCountingEmbedder(HashingEmbedder):
        def count_tokens(self, text: str) -> int:
            return len(text.split())

    doc = tmp_path / "toy.md"
    doc.write_text(
        "# Toy rules\n\n§ 1-101 Transparency. Providers of AI systems intended to interact directly with natural "
        "persons shall inform them that they are interacting with an AI system.\n\n"
        "§ 1-102 Fees. A fee of 10 dollars is due each year.\n",
        encoding="utf-8",
    )
    components = Components(Settings(data_dir=tmp_path / "data", **settings))
    components.__dict__["index"] = EmbeddedIndex(tmp_path / "data" / "index", embedder=HashingEmbedder())
    components.__dict__["embedder"] = WordCountingEmbedder()
    components.ingest(doc, "toy")
    return components


def test_a_collections_questions_are_searched_with_its_glossary(tmp_path):
    for root in (tmp_path, tmp_path / "off"):
        _write(root / "data" / "glossaries", "toy.toml", f'[terms]\n"{CHATBOT}" = ["chatbot"]\n"providers" = ["Acme"]\n')
    components = _toy_components(tmp_path)
    result = components.pipeline.answer("Must our chatbot say it is not human?", collection="toy")
    assert result.queries[0] == f"Must our chatbot ({CHATBOT}) say it is not human?"
    assert "§ 1-101" in result.contexts[0].chunk.label
    # a name the glossary gives the law's words for is no name the law is silent about
    assert "do not mention Acme" not in components.pipeline.answer("Must Acme inform people?", collection="toy").answer.text
    plain = _toy_components(tmp_path / "off", glossary=False)
    assert plain.pipeline.answer("Must our chatbot say it is not human?", collection="toy").queries[0] == (
        "Must our chatbot say it is not human?"
    )
    assert "do not mention Acme" in plain.pipeline.answer("Must Acme inform people?", collection="toy").answer.text


def test_a_broken_own_glossary_stops_the_bot_at_start_with_its_name(tmp_path):
    _write(tmp_path / "data" / "glossaries", "toy.toml", "[terms\n")
    components = _toy_components(tmp_path)
    components.served_collections = lambda: ["toy"]
    with pytest.raises(ServeSetupError, match=r"cannot read the glossary .*toy\.toml"):
        warm_up(components)


def test_a_question_about_what_the_law_never_mentions_is_told_so_with_the_nearest_provisions(tmp_path):
    _write(
        tmp_path / "data" / "glossaries",
        "toy.toml",
        '[silent]\n"an AI officer" = ["AI officer"]\n"fees" = ["fee"]\n',
    )
    components = _toy_components(tmp_path)
    answer = components.pipeline.answer("Must providers of chatbots appoint an AI officer?", collection="toy").answer
    assert answer.refused and "They do not mention an AI officer." in answer.text
    assert "nearest provisions I found are" in answer.text and "§ 1-101" in answer.text
    # the toy's fee rule, found for the question, uses the phrasing "fee": not a silence
    kept = components.pipeline.answer("What fee is due each year?", collection="toy").answer
    assert not kept.refused and "10 dollars" in kept.text
