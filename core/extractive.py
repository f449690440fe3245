"""Answers without an LLM: say which provision answers, and quote the sentences of it that do.

Every quote is a verbatim span of a retrieved chunk, followed by its citation number, so nothing can be
invented; the only words that are not the law's are the frame naming the provision ("Under 6 RCNY
§ 5-303(c) (Published Results): “…” [1]").

Choosing what to quote. The sentences of the best-ranked provisions compete on
* meaning: cosine of the question to the sentence (vectors stored at ingest),
* words: the share of the question's idf-weighted key terms the sentence holds,
* rank: the provision's place in the ranking (core/ranking.py already weighed the whole provision),
* role: operative text before examples, commentary and recitals (core/roles.py),
* the asked value: a question asking how long / how much / how many leads with the sentence that
  states such a value (core/answer_type.py).
The best sentence leads; up to two more follow when they score close to it and add key terms.

Abstaining by meaning, not by word overlap. Users rarely use the law's words ("careers page" for "the
employment section of its website"), so the share of question words found in the provisions says little
about whether they answer. The generator declines when
* the question asks for a value (a period, an amount, a number, an average, a sentiment) and no
  retrieved clause states one about what was asked ("They state no period or deadline for it."), or
* the question asks what a quoted term means and no retrieved provision uses that term ("the
  definition of 'Candidate for Promotion'"), or
* no sentence of the retrieved provisions is close in meaning to the question (cosine below
  `min_similarity`, set from questions written for this project, docs/RESULTS.md).
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Callable, Iterable, Protocol, Sequence

import numpy as np

from core.annex_content import HandedTo, annexes_handed_to, asks_for_content
from core.answer_type import AskedValue, asked_value, asks_whether_set, describe, states_value
from core.asks import asks_definition, asks_list, defined_names, defined_terms, defines, leads_a_list
from core.comparison import compared
from core.followup import asking_part, new_topic
from core.glossary import Glossary
from core.ingest.references import with_cited_titles
from core.lexicon import Lexicon, english_words, one_edit
from core.linear import LinearModel
from core.places import place_and_language_names
from core.query import THE_LAW
from core.roles import role_of
from core.termstats import TermStats
from core.text import (
    STOPWORDS,
    after_heading,
    asking_sentences,
    content_terms,
    framing_terms,
    message_sentences,
    quotable_spans,
    sentence_spans,
    trim_markup,
)
from core.thread_units import unit_of_label
from core.types import Answer, Chunk, Citation, ScoredChunk, Turn

REFUSAL_TEXT = "The loaded regulations don't address this question."


@dataclass(frozen=True)
class ExtractiveConfig:
    # Provisions the answer may quote from, best-ranked first.
    quote_provisions: int = 4
    max_sentences: int = 3
    # Quotes end at a sentence, so the word limit decides whether a second or third provision's
    # sentence fits; the key fact is often there. Chosen on the study halves for a readable length
    # (docs/RESULTS.md: a fourth quote states more facts still, at chat-unfriendly lengths).
    max_words: int = 160
    # A lead-in that ends in ":" ("... by doing any of the following:") is quoted with the items
    # after it, up to this many words.
    list_words: int = 110
    # Sentences after the first must be at least this likely (softmax of the sentence scores) as a
    # share of the first.
    follow_share: float = 0.1
    # No sentence this close in meaning to the question: the provisions do not answer it.
    min_similarity: float = 0.3
    # Without sentence vectors (no embedding model), the same test by words: the quoted provisions
    # must hold this share of the question's idf-weighted key terms.
    min_support: float = 0.3
    # A clause stating the asked value must (with the clause before it) hold this share of the
    # question's other key terms: the value must be about what was asked. Users' words are rarely the
    # law's ("the AI tool" for "an AEDT"), so this alone would refuse answerable questions; with the
    # meaning test below it can be lower (both set from the study halves, docs/RESULTS.md).
    min_value_binding: float = 0.2
    # ... and the sentence holding it must be this close in meaning to the question, or to one of
    # its parts read on its own (cosine; only with sentence vectors). Shared words alone bind the
    # 6 months a summary stays posted to "how long must we keep applicant data"; meaning tells them
    # apart. Set from the study halves of the user-style sets and checked on the measured halves
    # (docs/RESULTS.md).
    min_value_similarity: float = 0.48
    # A sentence this close in meaning states the asked value about what was asked even when the
    # user's words are none of its own ("police ... the judge's ok" for "a judicial authority ...
    # urgency"): the meaning test alone binds it. Chosen on the study halves and tuning sets
    # (docs/RESULTS.md, eighteenth update).
    value_by_meaning: float = 0.55


# What a sentence is scored on (model "sentences" of core/ranking_weights.json, learned by
# `hypa ranker train`; HAND_WEIGHTS when no model is given).
SENTENCE_FEATURES: tuple[str, ...] = (
    "cosine",  # cosine(question, sentence)
    "terms",  # share of the question's idf-weighted key terms in the sentence
    "provision_rank",  # 1 / (1 + the provision's place among the quoted ones)
    "provision_gap",  # the provision's ranking score minus the best one's (0 for the best)
    "definition",  # the provision's role (operative text is the baseline)
    "example",
    "recital",
    "commentary",
    "front",
    "states_value",  # the question asks for a value and the sentence states it about what was asked
    "opens_provision",  # the provision's first sentence
    "length",  # log(1 + words) / 4
    "defines_asked",  # the sentence defines, and its provision defines a term the question uses
    "list_asked",  # a "what must it include" question, and the sentence leads a list
    "definition_asked",  # a "what is / what counts as" question, and the sentence defines
)
HAND_WEIGHTS = {
    "cosine": 1.0, "terms": 0.5, "provision_rank": 0.3, "example": -0.1, "commentary": -0.2, "recital": -0.25,
    "front": -0.3, "states_value": 0.5,
}
_ROLE_FEATURES = ("definition", "example", "recital", "commentary", "front")


class SentenceVectors(Protocol):
    def get(self, texts: Sequence[str]) -> np.ndarray:
        """One L2-normalised embedding per text (storage/sentence_vectors.py)."""


class UnansweredQuestions(Protocol):
    def declined(self, query_vector: np.ndarray) -> tuple[str, float] | None:
        """The question the law was found not to answer that this one means nearly the same as, and
        how close it is; None for none (core/precedents.py)."""


@dataclass(frozen=True)
class _Sentence:
    rank: int  # the provision's place among the quoted ones
    start: int  # quoted span in the chunk's text (heading lines excluded)
    end: int
    unit: str  # the quotable unit as stored at ingest (for its vector)
    terms: frozenset[str]

    def text(self, chunks: Sequence[Chunk]) -> str:
        return chunks[self.rank].text[self.start : self.end]


@dataclass(frozen=True)
class _Candidates:
    """What the answer may quote, with one feature row per sentence; or why it must decline."""

    chunks: list[Chunk]
    sentences: list[_Sentence]
    features: np.ndarray
    weights: dict[str, float]  # the question's key terms and their idf
    refusal: str | None = None  # not None: decline, and say this ("" = no reason beyond the refusal)
    # Rows that may lead the answer: for a question asking for a value, those that state it.
    leads: frozenset[int] = frozenset()
    # Each side of a comparison the question asks for ("importer vs distributor").
    sides: list["_Side"] = field(default_factory=list)
    # The one operator role the question names ("do providers have to ..."), None for none or several.
    role: str | None = None
    # The key terms of each thing a message asks, when it asks two or more ("who goes after
    # companies, and where do the cases get heard?").
    parts: list[dict[str, float]] = field(default_factory=list)
    # Rows stating a value of the asked kind that the value was not bound to, when another row states
    # it about what was asked: in the chunk the answer leads with they mislead ("no less than ten
    # business days before such use" beside "within 30 days of the written request").
    other_values: frozenset[int] = frozenset()

    @classmethod
    def declined(cls, why: str) -> "_Candidates":
        return cls([], [], np.zeros((0, len(SENTENCE_FEATURES)), dtype=np.float32), {}, why)


# Words that say nothing of what is asked about: greetings, fillers, verbs of any action ("how long
# would we get to do that?", "ok what does it actually have to cover?", "hey, … before the tool kicks
# in?").
_FILLER_WORDS = frozenset(
    content_terms(
        "hey hi hello ok okay pls please thanks thank thx quick question guys folks like just really basically "
        "stuff thing things run runs running start starts started stay stays end ends put puts kick kicks look "
        "looks looked pull pulls count counts counted need needs want wants know let lets back away right ugh "
        "money doesn don isn aren didn wasn weren hasn haven won wouldn shouldn couldn"
    )
)


# Words that say nothing of what a follow-up is about ("how long would we get to do that?", "ok what
# does it actually have to cover?").
_NO_TOPIC_WORDS = frozenset(
    content_terms(
        "get gets got getting take takes make makes give gives go goes happen happens cover covers include "
        "includes contain contains actually"
    )
)

# Labels and headings that open a unit: "Article 4", "ANNEX III", "§ 5-301 Bias Audit.", "CHAPTER V".
_HEADING_LINE = re.compile(
    r"^\s*(?:Article\s+\d+[a-z]?|ANNEX\s+[IVXLC]+|Annex\s+[IVXLC]+|CHAPTER\s+[IVXLC]+|SECTION\s+\d+|Section\s+\d+"
    r"|§+\s*[\d-]+\.?|#{1,6}\s.*)\s*$"
)
_CLAUSE_END = re.compile(r"(?<=;)\s+")
# A chunk that opens with a lettered or numbered item ("(f) the testing ...", "(iii) ..."): one item
# of a list whose lead-in is in another chunk.
_ITEM_CHUNK = re.compile(r"^\s*\((?:[a-z]{1,2}|[ivx]{1,5})\)\s")
_LIST_ITEM = re.compile(r"^\s*(?:\(?\d{1,2}[.)]|\(?[a-z][.)]|\([ivx]+\)|[•\-–])\s")
_ENUMERATOR = re.compile(r"^\s*(?:\((?P<paren>[a-z]{1,2}|[ivx]{1,5}|\d{1,2})\)|(?P<dot>\d{1,2})\.)\s")
MIN_QUOTE_WORDS = 4
MAX_HEADING_WORDS = 10


class ExtractiveGenerator:
    """Implements core.pipeline.Generator."""

    model_name = "extractive"

    def __init__(
        self,
        term_stats: Callable[[str], TermStats],
        config: ExtractiveConfig = ExtractiveConfig(),
        sentence_vectors: SentenceVectors | None = None,
        model: LinearModel | None = None,
        glossary: Callable[[str], Glossary] = lambda collection: Glossary(),
        lexicon: Callable[[str], Lexicon] | None = None,
        unanswered: Callable[[str], UnansweredQuestions] | None = None,
    ) -> None:
        # term_stats(collection) -> statistics of that collection (cached by the caller).
        self._term_stats = term_stats
        # glossary(collection) -> its glossary (core/glossary.py): a name it gives the law's words
        # for ("Brussels") is not a name the law is silent about; a topic it lists as [silent] is
        # declined; a user's word the law never uses is bound to a value by the law's words for it.
        self._glossary = glossary
        # lexicon(collection) -> its lexicon (core/lexicon.py): an abbreviation the law never writes
        # ("GPAI") is bound to a value by the long form the law does write ("general-purpose AI").
        self._lexicon = lexicon
        # unanswered(collection) -> the questions it was found not to answer (precedents): one that
        # means nearly the same as the question is declined, like a glossary's [silent] topic.
        self._unanswered = unanswered
        self.config = config
        self._sentence_vectors = sentence_vectors
        self.model = model or LinearModel.of(SENTENCE_FEATURES, HAND_WEIGHTS)
        if self.model.features != SENTENCE_FEATURES:
            raise ValueError("the sentence model must score SENTENCE_FEATURES")

    def generate(
        self,
        question: str,
        contexts: Sequence[ScoredChunk],
        history: Sequence[Turn] = (),
        query_vector: np.ndarray | None = None,
        asked: str | None = None,  # the user's own words in another language: quotes stay English
        asking_vectors: np.ndarray | None = None,
    ) -> Answer:
        found = self.candidates(question, contexts, query_vector, asking_part(question, history), asking_vectors)
        if found.refusal is not None:
            return self._refusal(contexts, found.refusal)
        scores = self.model.score(found.features)
        chosen = [self._with_list(s, found.chunks) for s in self._choose(found, scores)]
        if asks_for_content(asking_part(question, history) or question):
            chosen = self._with_annexes(chosen, found)
        return self._render(_without_overlaps(chosen), found.chunks)

    def candidates(
        self,
        question: str,
        contexts: Sequence[ScoredChunk],
        query_vector: np.ndarray | None = None,
        asking: str | None = None,
        asking_vectors: np.ndarray | None = None,
    ) -> "_Candidates":
        """The sentences the answer may quote and their features, or why it must decline.

        `asking`: the part of `question` that asks (a follow-up searched together with the question
        before it asks only its own part: see `asking_part`); None when all of it asks.
        `asking_vectors`: embeddings of the question's parts (see core.pipeline.Generator)."""
        asking = asking or question
        quoted = [sc for sc in contexts if sc.kind == "chunk"][: self.config.quote_provisions]
        chunks = [sc.chunk for sc in quoted]
        if not chunks:
            return _Candidates.declined("")
        stats = self._term_stats(chunks[0].collection)
        glossary = self._glossary(chunks[0].collection)
        weights = {t: stats.idf(t) for t in set(content_terms(question)) - framing_terms(question)}
        # A sentence is credited with the law's words for what the user calls otherwise ("chatbot":
        # "AI systems intended to interact directly with natural persons"), as the value is bound.
        expansions = self._expansions(question, glossary, chunks[0].collection)
        weights = _in_the_laws_words(weights, expansions, stats)
        sentences = _sentences(chunks)
        # Front matter (a bill's title block, a document's header) states no rule: never the answer
        # while a provision can be quoted.
        sentences = [s for s in sentences if role_of(chunks[s.rank]) != "front"] or sentences
        # A table's rows run together ("Male 92 54.3% 1.00 Female 76 ...") state no rule: quoted
        # only for a question about the example, sample or table they belong to.
        if not _TABLE_ASKED & set(weights):
            sentences = [s for s in sentences if not _is_table(s.text(chunks))] or sentences
        if not sentences:
            return _Candidates.declined("")
        # A follow-up asks only its own part: a place named in the question before it was that
        # question's concern ("... in our Manhattan office?" -> "ok and what counts as an independent auditor?").
        names = unknown_names(asking, stats, glossary.words)
        if names:
            return _Candidates.declined(f"They do not mention {_joined(names)}.")
        # What users ask about that the law never mentions (a glossary's [silent] topics): quoting
        # the nearest rule would read as an answer ("do we need candidates' consent?" -> the notice
        # rule). Checked against every retrieved provision, not only the quoted ones.
        retrieved = "\n".join(f"{sc.chunk.heading}\n{sc.chunk.text}" for sc in contexts if sc.kind == "chunk")
        topics = glossary.silent_on(asked_text(asking), retrieved)
        if topics:
            return _Candidates.declined(f"They do not mention {_joined(topics)}.")
        # A question asking what a term means is answered where the law defines that term, however
        # near it is to one about the term that the law does not answer ("what counts as an
        # independent auditor?" beside "does the independent auditor need a licence?").
        like = None
        if self._unanswered is not None and query_vector is not None and not _defines_asked_term(asking, chunks):
            like = self._unanswered(chunks[0].collection).declined(query_vector)
        for term in defined_term_asked(question):
            if not any(f" {term} " in f" {' '.join(content_terms(s.text(chunks)))} " for s in sentences):
                return _Candidates.declined("They define no such term.")
        cosines, to_parts = self._cosines(sentences, chunks, query_vector, asking_vectors)
        asked = asked_value(asking)
        # What a follow-up names anew; the words that ask ("how long") and words saying nothing of
        # what ("how long would we get to do that?") name nothing.
        topic_terms = new_topic(question, asking) - (asked.words if asked is not None else frozenset()) - _NO_TOPIC_WORDS
        stating: dict[_Sentence, float] = {}
        if asked is not None:
            # The value is about what the sentence asking for it names, not the scene around it
            # ("... after launch? legal is asking for a retention schedule"), and, for a follow-up,
            # about what the question before it named ("how long do we get?"). A sentence after
            # the first keeps its leading space, which most value patterns do not accept, so a value
            # asked after a statement is judged against the whole message; stripped, and so judged
            # on its own sentence, answers were lost (docs/RESULTS.md, fourth update). Of two or
            # more questions, the one that asks for the value is what it is about ("Is it free? How
            # much does a sandbox cost?").
            said = message_sentences(asking)
            sentence = next((a for a in said if asked_value(a) is not None), asking)
            questions = [a.strip() for a in said if a.strip().endswith("?")]
            if len(questions) > 1:
                sentence = next((a for a in questions if asked_value(a) is not None), sentence)
            earlier = question[: len(question) - len(asking)] if question.endswith(asking) else ""
            # ... unless the follow-up names something new: "and the fines?" after "we sell a
            # CV-screening system" asks the fines' amount, which no hiring clause states.
            if topic_terms:
                earlier = ""
            named = set(content_terms(sentence)) | set(content_terms(earlier))
            # "us" is the asker ("how long until they tell us …?"), not what the value is about.
            about = {t: w for t, w in weights.items() if t in named and t != "us"} or weights
            if sentence != question:  # a value asked in one sentence of several: that sentence's phrasings
                expansions = self._expansions(sentence, glossary, chunks[0].collection)
            about = _in_the_laws_words(about, expansions, stats)
            # The subject in the law's words too ("the pilot": "testing in real world conditions").
            subject_in_laws_words = _laws_words_naming(expansions, {asked.subject} if asked.subject else set())
            stating = self._stating_asked_value(
                sentences, chunks, asked, about, cosines, stats, query_vector, subject_in_laws_words, to_parts,
                _law_words_for(about, expansions, stats),
            )
            if not stating and asked.required:
                return _Candidates.declined(f"They state no {describe(asked)} for it.")
        # A question the law was found not to answer declines a question near it, unless this one
        # asks for the value of something (not whether there is one: "is there a cutoff?"), that
        # one asks for none, and a clause states it about what is asked ("how old can the bias
        # audit be before we have to stop using the tool?" beside "does the law require us to stop
        # using the tool if the audit shows bias?": the audit's one year).
        if like is not None and not (
            stating and asked is not None and not asks_whether_set(asking) and asked_value(like[0]) is None
        ):
            return _Candidates.declined(f"They were found not to answer a question like it: “{like[0]}”")
        if cosines is not None:
            # close in meaning to the question, or to one of its parts read on its own
            nearest = max(float(cosines.max()), float(to_parts.max()))
            if nearest < self.config.min_similarity:
                return _Candidates.declined("")
        elif _coverage(frozenset().union(*(s.terms for s in sentences)), weights) < self.config.min_support:
            return _Candidates.declined("")
        x = self._features(question, sentences, quoted, weights, cosines, stating)
        if stating:  # a value question is answered by the clause that best states the value about it
            most = max(stating.values())
            leads = frozenset(i for i, s in enumerate(sentences) if stating.get(s, -1.0) >= most)
        else:
            leads = frozenset(range(len(sentences)))
        # A short follow-up asks about what it names anew ("and the penalties?" after "who may do
        # the bias audit?"): the answer leads with a sentence that names it, where one does.
        # A sentence in the law's words for it names it too ("and do we have to tell staff?": "inform
        # workers' representatives and the affected workers", not "the staff of notified bodies").
        topic = {t: stats.idf(t) for t in topic_terms}
        if topic:
            topic_expansions = self._expansions(asking, glossary, chunks[0].collection)
            named_by_law = _laws_words_naming(topic_expansions, topic_terms)
            topic = _in_the_laws_words(topic, topic_expansions, stats)
            leads = (
                frozenset(
                    i for i in leads
                    if set(topic) & sentences[i].terms or any(law and law <= sentences[i].terms for law in named_by_law)
                )
                or leads
            )
        sides = self._sides(asking, glossary, stats, chunks[0].collection)
        roles = {_role(m) for m in _ROLE.findall(asking)}
        role = roles.pop() if len(roles) == 1 else None
        parts = [] if sides else self._parts(asking, glossary, stats, chunks[0].collection)
        other_values = frozenset(
            i for i, s in enumerate(sentences) if stating and s not in stating and asked and states_value(s.text(chunks), asked)
        )
        return _Candidates(
            chunks, sentences, x, weights, leads=leads, sides=sides, role=role, parts=parts, other_values=other_values
        )

    def _parts(self, asking: str, glossary: Glossary, stats: TermStats, collection: str) -> list[dict[str, float]]:
        """The key terms of each thing `asking` asks (`question_parts`), in the law's words; none
        when it asks one thing, or when fewer than two of its parts name anything the law uses."""
        parts = []
        for part in question_parts(asking):
            expansions = self._expansions(part, glossary, collection)
            terms = _used_terms(set(content_terms(part)) - framing_terms(part), expansions, stats)
            if terms:
                parts.append(terms)
        return parts if len(parts) > 1 else []

    def _sides(self, asking: str, glossary: Glossary, stats: TermStats, collection: str) -> list["_Side"]:
        """Each side of a comparison the question asks for (none when it asks none)."""
        comparison = compared(asking)
        if comparison is None:
            return []
        sides, law_words = [], []
        for side in (comparison.first, comparison.second):
            expansions = self._expansions(side, glossary, collection)
            sides.append(_used_terms(content_terms(side), expansions, stats))
            law_words.append(_law_words_for(sides[-1], expansions, stats))
        if not all(sides):
            return []
        # What the sides share does not tell them apart ("selection rate vs scoring rate": "rate"):
        # counted, the definition of one side would speak of the other too.
        shared = set(sides[0]) & set(sides[1])
        distinct = [{t: w for t, w in side.items() if t not in shared} for side in sides]
        return [_Side(terms, law) for terms, law in zip(distinct if all(distinct) else sides, law_words)]

    def _expansions(self, text: str, glossary: Glossary, collection: str) -> tuple[tuple[str, str], ...]:
        """(as typed, the law's words) for the glossary's phrasings and the abbreviations in `text`."""
        _, expansions = glossary.expand(text)
        if self._lexicon is not None:
            expansions += tuple(self._lexicon(collection).abbreviations(text))
        return expansions

    # -- signals -------------------------------------------------------------------------------

    def _cosines(
        self,
        sentences: list[_Sentence],
        chunks: list[Chunk],
        query_vector: np.ndarray | None,
        asking_vectors: np.ndarray | None = None,
    ) -> tuple[np.ndarray | None, np.ndarray]:
        """How close each sentence is to the question: as quoted, or read with the titles of the
        units it cites, whichever is closer ("(a) Chapters I and II shall apply from …" is about
        prohibited AI practices, Chapter II). Both readings are stored at ingest. And each
        sentence's best cosine, as quoted, to a part of the question read on its own
        (`asking_vectors`; zeros without them)."""
        to_parts = np.zeros(len(sentences), dtype=np.float32)
        if self._sentence_vectors is None or query_vector is None:
            return None, to_parts
        query = np.asarray(query_vector, dtype=np.float32)
        stored = self._sentence_vectors.get([s.unit for s in sentences])
        cosines = stored @ query
        if asking_vectors is not None and len(asking_vectors):
            to_parts = (stored @ np.asarray(asking_vectors, dtype=np.float32).T).max(axis=1)
        titled = [with_cited_titles(s.unit, chunks[s.rank].references) for s in sentences]
        rows = [i for i, (s, t) in enumerate(zip(sentences, titled)) if t != s.unit]
        if rows:
            read = self._sentence_vectors.get([titled[i] for i in rows]) @ query
            cosines[rows] = np.maximum(cosines[rows], read)
        return cosines, to_parts

    def _features(
        self,
        question: str,
        sentences: list[_Sentence],
        quoted: list[ScoredChunk],
        weights: dict[str, float],
        cosines: np.ndarray | None,
        stating: dict[_Sentence, float],
    ) -> np.ndarray:
        col = {name: i for i, name in enumerate(SENTENCE_FEATURES)}
        x = np.zeros((len(sentences), len(SENTENCE_FEATURES)), dtype=np.float32)
        if cosines is not None:
            x[:, col["cosine"]] = cosines
        asks_example = "exampl" in weights  # a question about the example wants the example
        wants_list, wants_definition = asks_list(question), asks_definition(question)
        asked = _padded_terms(question)
        defines_asked = [_defines_a_term_of(sc.chunk, asked) for sc in quoted]
        top = quoted[0].score
        chunks = [sc.chunk for sc in quoted]
        first_of: dict[int, int] = {}
        for i, s in enumerate(sentences):
            first_of.setdefault(s.rank, i)
            x[i, col["terms"]] = _coverage(s.terms, weights)
            x[i, col["provision_rank"]] = 1.0 / (1.0 + s.rank)
            x[i, col["provision_gap"]] = max(-10.0, quoted[s.rank].score - top)
            role = role_of(quoted[s.rank].chunk)
            if role in _ROLE_FEATURES and not (role == "example" and asks_example):
                x[i, col[role]] = 1.0
            x[i, col["states_value"]] = 1.0 if s in stating else 0.0
            x[i, col["opens_provision"]] = 1.0 if first_of[s.rank] == i else 0.0
            text = s.text(chunks)
            x[i, col["length"]] = math.log1p(len(text.split())) / 4.0
            x[i, col["defines_asked"]] = 1.0 if defines_asked[s.rank] and defines(text) else 0.0
            x[i, col["list_asked"]] = 1.0 if wants_list and leads_a_list(text) else 0.0
            x[i, col["definition_asked"]] = 1.0 if wants_definition and defines(text) else 0.0
        return x

    def _stating_asked_value(
        self,
        sentences: list[_Sentence],
        chunks: list[Chunk],
        asked: AskedValue,
        weights: dict[str, float],
        cosines: np.ndarray | None,
        stats: TermStats,
        query_vector: np.ndarray | None = None,
        subject_in_laws_words: Sequence[frozenset[str]] = (),
        to_parts: np.ndarray | None = None,
        law_words: dict[str, tuple[frozenset[str], ...]] | None = None,
    ) -> dict[_Sentence, float]:
        """The sentences with a clause that states the asked kind of value about what was asked, with
        how much of what was asked their best such clause holds (with the clause before it).

        About what was asked: the clause (with the one before it) holds enough of the question's
        other key terms, names what a retention question asks about keeping, and the sentence is close
        enough in meaning to the question. A word the user typed counts as held where the clause
        holds the law's words for it (`law_words`: "applicants" in the notice rule's "candidates").
        A chunk that is one item of a list whose lead-in another chunk holds ("(f) the testing ...
        not longer than six months") is read with its provision's
        heading ("Testing of high-risk AI systems in real world conditions outside AI regulatory
        sandboxes"), which says what the item is about."""
        # The asking words go before clipped words are filled out ("lead time" is not "leadership").
        about = _unclipped({t: w for t, w in weights.items() if t not in asked.words}, stats)
        law_words = law_words or {}
        # A word the collection never uses that says nothing of what is asked ("hey", "kicks in",
        # "get", a typo of a word it does use: "canidates") is in no clause: counted, it thins the
        # share of what was asked that any clause can hold. Where sentence meaning is checked
        # (`min_value_similarity`), meaning judges such words instead. Any other such word names
        # what the value is about, and no clause here holds it: "how long do candidates have to
        # file a complaint?" is not answered by the notice period.
        if cosines is not None:
            about = {t: w for t, w in about.items() if stats.doc_freq.get(t, 0) or not _says_nothing(t, stats)} or about
        titled = {
            s.rank: frozenset(content_terms(chunks[s.rank].heading))
            for s in sentences
            if _ITEM_CHUNK.match(chunks[s.rank].text) and chunks[s.rank].heading.strip()
        }
        cosines = self._with_headings(sentences, chunks, cosines, query_vector, titled)
        # ... or to a part of the question read on its own (`to_parts`: "We put the notice in the
        # job posting this morning. How soon can the tool start screening?"): the scene pulls the
        # whole message's meaning away from the clause that states the period.
        if to_parts is None:
            to_parts = np.zeros(len(sentences), dtype=np.float32)
        # Provisions that mention the question's subject; a value elsewhere is someone else's. A
        # subject the collection never uses ("the franchisee") cannot tell one provision from another.
        # A provision naming the subject in the law's words for it (`subject_in_laws_words`, from the
        # glossary: "how long can the pilot run?" is about "testing in real world conditions") names it too.
        subject = asked.subject if asked.subject is not None and stats.doc_freq.get(asked.subject, 0) else None
        headings = {rank: frozenset(content_terms(chunks[rank].heading)) for rank in {s.rank for s in sentences}}

        def names_subject(s: _Sentence) -> bool:
            terms = s.terms | titled.get(s.rank, set())
            if subject is None or subject in terms:
                return True
            return any(law and law <= terms | headings[s.rank] for law in subject_in_laws_words)

        about_subject = {s.rank for s in sentences if names_subject(s)}
        # A worked example's figures are its scenario's ("has used the tool for 3 years"), not a rule:
        # they state the asked value only to a question about the example itself.
        stated_by = {
            s.rank for s in sentences if s.rank in about_subject and (role_of(chunks[s.rank]) != "example" or "exampl" in weights)
        }

        items = _list_items_terms(sentences, chunks)
        # What a retention question asks about keeping, in the words the collection uses.
        kept = {t for t in asked.kept if stats.doc_freq.get(t, 0)}
        # An amount is bound by its provision's heading too: the heading names what the amount is of
        # ("Penalties", "Fees"). Not a period: an example's heading ("Data Requirements — Example 3")
        # bound a stated period to a retention question it does not answer.
        amount = any("money" in group for group in asked.kinds)
        stating: dict[_Sentence, float] = {}
        previous: frozenset[str] = frozenset()
        rank = -1
        for i, s in enumerate(sentences):
            if s.rank != rank:  # the clause before must come from the same provision
                rank, previous = s.rank, frozenset()
            if rank not in stated_by:
                continue
            close = cosines is None or max(float(cosines[i]), float(to_parts[i])) >= self.config.min_value_similarity
            clauses = _CLAUSE_END.split(s.text(chunks))
            for n, clause in enumerate(clauses):
                terms = frozenset(content_terms(clause))
                # A lead-in ("The provider shall, for a period ending 10 years after ..., keep at the
                # disposal of the national competent authorities:") is about the items it leads.
                context = previous | (items[i] if n == len(clauses) - 1 else frozenset()) | titled.get(rank, frozenset())
                if amount:  # "Penalties" (Art. 99) says what its "fines of up to 35 000 000 EUR" are
                    context = context | headings[rank]
                if subject_in_laws_words and asked.subject and any(
                    law and law <= terms | context | headings[rank] for law in subject_in_laws_words
                ):
                    context = context | {asked.subject}  # the clause names the subject in the law's words
                held = terms | context
                held = held | {t for t, laws in law_words.items() if any(law <= held for law in laws)}
                binding = _coverage(held, about) if about else 1.0
                # a retention period must be for keeping what was asked about, not something else
                names_kept = not kept or not kept.isdisjoint(terms | context)
                # A clause keeping all of what was asked about is about it, however much scene the
                # question sets ("HR here. The vendor's tool writes logs into our tenant. How long do
                # we keep those logs?")
                bound = (
                    (names_kept and binding >= self.config.min_value_binding)
                    or (bool(kept) and kept <= terms | context)
                    # A clause holding some of the question's words but too few is judged by them
                    # (the 10-day notice shares "candidates" with "how long do candidates have to
                    # file a complaint?", not the complaint); one holding none is judged by meaning.
                    or (
                        names_kept
                        and binding == 0.0
                        and cosines is not None
                        and float(cosines[i]) >= self.config.value_by_meaning
                    )
                )
                if close and bound and states_value(clause, asked):
                    stating[s] = max(stating.get(s, 0.0), binding)
                previous = terms
        return stating

    def _with_headings(
        self,
        sentences: list[_Sentence],
        chunks: list[Chunk],
        cosines: np.ndarray | None,
        query_vector: np.ndarray | None,
        titled: dict[int, frozenset[str]],
    ) -> np.ndarray | None:
        """`cosines`, where a sentence of a `titled` chunk is closer to the question read after its
        heading, that closeness."""
        if cosines is None or query_vector is None or self._sentence_vectors is None or not titled:
            return cosines
        rows = [i for i, s in enumerate(sentences) if s.rank in titled]
        texts = [f"{chunks[sentences[i].rank].heading.strip()}: {sentences[i].text(chunks)}" for i in rows]
        read = self._sentence_vectors.get(texts) @ np.asarray(query_vector, dtype=np.float32)
        out = cosines.copy()
        out[rows] = np.maximum(out[rows], read)
        return out

    # -- choosing sentences --------------------------------------------------------------------

    def _choose(self, found: "_Candidates", scores: np.ndarray) -> list[_Sentence]:
        """The best sentence, then those almost as likely that add key terms the answer lacks."""
        sentences, chunks, weights = found.sentences, found.chunks, found.weights
        order = sorted(range(len(sentences)), key=lambda i: (-scores[i], sentences[i].rank, sentences[i].start))
        best = next(i for i in order if i in found.leads)
        best = self._role_lead(found, order, best)
        chosen = [sentences[best]]

        def words(s: _Sentence) -> int:
            return len(s.text(chunks).split())

        def fits(i: int, alike: bool = False) -> bool:
            """New to the answer, no near-duplicate of a quote (unless `alike` may be), within the word limit."""
            s = sentences[i]
            return (
                s not in chosen
                and (alike or not any(_near_duplicate(s, c) for c in chosen))
                and sum(map(words, chosen)) + words(s) <= self.config.max_words
            )

        def misleads(i: int) -> bool:
            """A value of the asked kind about something else, in the chunk the answer leads with
            (another chunk's may answer another part of the message)."""
            return i in found.other_values and sentences[i].rank == sentences[best].rank

        # A comparison is answered about both sides: the best sentence about a side no quote speaks
        # of yet comes next, however much less likely than the first, and however like the first it
        # is worded (two definitions of the same shape: the difference is what is asked).
        # A side the law defines is spoken of by its definition, not by a rule that names it
        # ("provider vs deployer": Art. 3(3) beside Art. 3(4), not a duty that names providers;
        # "historical data vs test data": § 5-302(b) names both, § 5-300 says what each is).
        extra = 0  # quotes on top of max_sentences: sides' definitions, parts' sentences
        home = _provision(chunks[chosen[0].rank])
        for side in found.sides:
            speaking = [
                i for i in order if fits(i, alike=True) and _speaks_of(sentences[i].text(chunks), sentences[i].terms, side)
            ]
            defined = [i for i in speaking if defined_names(sentences[i].text(chunks))]
            if len(chosen) >= self.config.max_sentences or any(
                _speaks_of(c.text(chunks), c.terms, side) and (not defined or defined_names(c.text(chunks))) for c in chosen
            ):
                continue
            # The law often answers both sides in parallel clauses of one provision (§ 5-304(b) for
            # candidates, (c) for employees up for promotion): a side's clause is sought there first.
            parallel = [i for i in defined or speaking if _provision(chunks[sentences[i].rank]) == home]
            about = next(iter(parallel or defined or speaking), None)
            if about is not None:
                chosen.append(sentences[self._list_lead_in(found, about, speaking)])
                extra += 1 if defined else 0
        floor = float(scores[best]) + math.log(self.config.follow_share)
        # Each thing a message asks is answered: among the sentences likely enough to follow the
        # first, the best about a part no quote holds yet comes next ("who goes after companies,
        # and where do the penalty cases get heard?": the enforcement clause beside the hearings one).
        for part in found.parts:
            if any(_coverage(c.terms, part) >= _PART_COVERED for c in chosen):
                continue
            about = next(
                (i for i in order if scores[i] >= floor and fits(i) and _coverage(sentences[i].terms, part) >= _PART_COVERED),
                None,
            )
            if about is not None:
                chosen.append(sentences[about])
                extra += 1
        # The sides' definitions and the parts' sentences answer what the message asks; the rest of
        # it ("…, and when may we use test data?") still has the usual number of quotes, within the
        # word limit.
        while len(chosen) < self.config.max_sentences + extra:
            candidates = [i for i in order if scores[i] >= floor and fits(i) and not misleads(i)]
            if not candidates:
                break
            covered = set().union(*(c.terms for c in chosen))
            nxt = max(candidates, key=lambda i: (scores[i] + _coverage(sentences[i].terms - covered, weights), -i))
            chosen.append(sentences[nxt])
        return chosen

    @staticmethod
    def _list_lead_in(found: "_Candidates", item: int, speaking: list[int]) -> int:
        """`item`, or, when it is an item of a list whose lead-in speaks of the same side, that
        lead-in (quoted with its items): a side's rule is the whole list ("may provide notice to a
        candidate for employment … by doing any of the following:"), not its second item."""
        s, chunks = found.sentences[item], found.chunks
        if _LIST_ITEM.match(s.text(chunks)) is None:
            return item
        before = [
            i for i in speaking
            if found.sentences[i].rank == s.rank and found.sentences[i].end <= s.start
            and _opens_list(found.sentences[i].text(chunks))
        ]
        return max(before, key=lambda i: found.sentences[i].start, default=item)

    def _role_lead(self, found: "_Candidates", order: list[int], best: int) -> int:
        """`best`, or, when its subject is another operator than the one the question names, the best
        lead-eligible sentence whose subject is that one: someone else's duty does not answer ("we're
        only a distributor ... what do we have to do?" -> Art. 24(4) "A distributor that considers ...",
        not Art. 26(8) "Deployers of high-risk AI systems that are public authorities ..."). Without
        such a sentence `best` stays: whether the law is silent is not judged from subjects (refusing
        then lost three answerable questions for one unanswerable, docs/RESULTS.md)."""
        if found.role is None:
            return best
        subject = _role_subject(found.sentences[best].text(found.chunks))
        if subject is None or subject == found.role:
            return best
        own = (i for i in order if i in found.leads and _role_subject(found.sentences[i].text(found.chunks)) == found.role)
        return next(own, best)

    def _with_list(self, s: _Sentence, chunks: list[Chunk]) -> _Sentence:
        """A lead-in ending in ':' is quoted together with the list items that follow it, each with
        one sentence that may follow it ("2. The job qualifications ... . Such notice shall be made no
        less than 10 business days before such use;"); two sentences in a row that are no item, or a
        table, end the list."""
        text = chunks[s.rank].text
        if not _opens_list(text[s.start : s.end]):
            return s
        end = s.end
        budget = self.config.list_words
        after_item = True  # the first piece is taken whatever it is
        for a, b in sentence_spans(text[s.end :]):
            piece = text[s.end + a : s.end + b]
            item = _LIST_ITEM.match(piece) is not None
            if not (item or after_item) or _is_table(piece):
                break
            after_item = item
            budget -= len(piece.split())
            if budget < 0:
                break
            end = s.end + b
        return _Sentence(s.rank, s.start, end, s.unit, frozenset(content_terms(text[s.start : end])))

    def _with_annexes(self, chosen: list[_Sentence], found: "_Candidates") -> list[_Sentence]:
        """`chosen` with, after a sentence that hands content to an annex ("shall contain the
        information set out in Annex V"), the sentences of that annex the contexts hold, in their
        order, as far as `list_words` allow: for a question asking what something holds, what the
        sentence points to is what was asked."""
        units = [unit_of_label(chunk.label) for chunk in found.chunks]
        out: list[_Sentence] = []
        quoted: set[HandedTo] = set()
        for s in chosen:
            if s in out:  # already quoted after the sentence that hands its annex over
                continue
            out.append(s)
            for annex in annexes_handed_to(s.text(found.chunks)):
                if annex in quoted:
                    continue
                quoted.add(annex)
                budget = self.config.list_words
                for other in found.sentences:
                    if not annex.holds(found.chunks[other.rank], units[other.rank]) or other in out:
                        continue
                    budget -= len(other.text(found.chunks).split())
                    if budget < 0:
                        break
                    out.append(other)
        return out

    # -- output --------------------------------------------------------------------------------

    def _render(self, chosen: list[_Sentence], chunks: list[Chunk]) -> Answer:
        """One frame per provision, in the order they were chosen (the best first); within a
        provision, its sentences in the law's order."""
        first_use = {s.rank: i for i, s in reversed(list(enumerate(chosen)))}
        chosen = sorted(chosen, key=lambda s: (first_use[s.rank], s.start))
        numbers: dict[int, int] = {}
        citations: list[Citation] = []
        parts: list[str] = []
        for rank in dict.fromkeys(s.rank for s in chosen):
            chunk = chunks[rank]
            n = numbers.setdefault(rank, len(numbers) + 1)
            sentences = [s.text(chunks) for s in chosen if s.rank == rank]
            label = provision_name(chunk, sentences[0])  # its enumerator may open a heading
            quotes = [_without_named_heading(q, label) for q in sentences]
            for quote in quotes:
                citations.append(Citation(n=n, chunk_id=chunk.id, label=chunk.label, quote=quote))
            body = " … ".join(" ".join(q.split()) for q in quotes)
            parts.append(f"{'Under' if not parts else 'And under'} {label}: “{body}” [{n}]")
        return Answer(text="\n".join(parts), refused=False, citations=citations, model=self.model_name)

    def _refusal(self, contexts: Sequence[ScoredChunk], why: str = "") -> Answer:
        nearest: list[str] = []
        for sc in contexts[:3]:
            if sc.chunk.label not in nearest:
                nearest.append(sc.chunk.label)
        text = f"{REFUSAL_TEXT} {why}" if why else REFUSAL_TEXT
        if nearest:
            text += " The nearest provisions I found are " + "; ".join(nearest) + "."
        return Answer(text=text, refused=True, citations=[], model=self.model_name)


# A name in the sentence that asks: capitalised (not the first word), or letters and digits together.
_NAME = re.compile(r"(?<![\w'’-])(?:[A-Z][a-z]+[A-Z]\w*|[A-Z][a-z]{2,}|[A-Z]{2,}[/-]?[A-Z]*\s?\d{3,})(?=['’]s\b|(?![\w'’-]))")
_CALENDAR = frozenset(
    "january february march april may june july august september october november december monday tuesday "
    "wednesday thursday friday saturday sunday".split()
)
# "<kind> like|such as|e.g. <name>": the word naming the kind the name is an example of.
_EXAMPLE_BEFORE = re.compile(r"\b(\w+)\s+(?:like|such\s+as|e\.g\.,?|for\s+example,?|for\s+instance,?)\s+$", re.IGNORECASE)
_PLAIN = re.compile(r"\b(?:plain|simple)\s+$", re.IGNORECASE)
_LOWER_WORD = re.compile(r"(?<![\w'’-])[a-z]{3,}(?![\w'’-])")
# Where someone lives or a company sits ("an applicant who lives in Jersey City", "we're based in
# Texas"): whom the law reaches is a question it answers (residence, establishment), not a question
# about that place's own law.
_WHERE_SOMEONE_IS = re.compile(
    r"\b(?:lives?|living|resides?|residing|based|located|established|headquartered)\s+(?:in|out\s+of)\s+(?:[A-Z]\w*\s+)?$",
    re.IGNORECASE,
)


# A second question inside a sentence: "who goes after companies, and where are the cases heard?"
_AND_ASKS = re.compile(
    r"(?:,\s*|\s+[—–-]\s*|\s+)(?:and|also|plus)\s+(?=(?:who|whom|what|where|when|which|how|do|does|is|are|can|"
    r"must|will|would|should|may)\b)",
    re.IGNORECASE,
)


def question_parts(question: str) -> list[str]:
    """The things a message asks: its asking sentences (`asking_sentences`), each split where
    ", and where/who/how …" opens another question."""
    return [p.strip() for s in asking_sentences(question) for p in _AND_ASKS.split(s) if p.strip()]


# "we're rolling out the tool in our german warehouses, do we have to tell the works council?": a
# statement before the comma (or a dash: "it's pure SaaS — how do we …?") sets the scene as a
# sentence of its own would; a condition ("if we also hire in Illinois, ...") is part of what is
# asked, and so is a question's own clause.
# ("who" and "which" after a comma open a relative clause: "Does John, who developed the tool, …?")
_ASK_AFTER_SCENE = re.compile(
    r"(?:,|\s[—–-])\s+(?=(?:do|does|is|are|can|could|would|will|should|must|may|what|how)\s)", re.IGNORECASE
)
# What opens a condition, or a question rather than a statement.
_NOT_SCENE = re.compile(
    r"\s*(?:if|when|unless|once|whether|in case|as long as|provided|do|does|did|is|are|can|could|would|will|"
    r"should|must|may|has|have|had|what|which|who|whom|whose|how|where|why)\b",
    re.IGNORECASE,
)


def asked_text(question: str) -> str:
    """What a message asks: its asking sentences without the scene that opens them."""
    return " ".join(map(_without_scene, asking_sentences(question)))


def _without_scene(sentence: str) -> str:
    """The asking sentence without a statement clause that opens it before ", do we …?"."""
    breaks = list(_ASK_AFTER_SCENE.finditer(sentence))
    if not breaks or _NOT_SCENE.match(sentence):
        return sentence
    return sentence[breaks[-1].end() :]


def unknown_names(question: str, stats: TermStats, known: frozenset[str] = frozenset()) -> list[str]:
    """Names in the sentences that ask which the collection never uses ("Is Microsoft Copilot
    high-risk?", "What do Illinois and Colorado require?"): the regulations say nothing about them.
    `known`: lower-case words that are not such names though the collection never uses them (its
    glossary's: "Brussels" for the AI Office)."""
    names = []
    for text in map(_without_scene, asking_sentences(question)):
        first = re.match(r"\s*\W*(\w+)", text)
        for m in _NAME.finditer(text):
            word = m.group(0)
            if first is not None and m.start() <= first.start(1):
                continue  # a sentence's first word is capitalised anyway
            terms = content_terms(word)
            if not terms or word.lower() in _CALENDAR or word.lower() in known or THE_LAW.fullmatch(word):
                continue  # a date, or the law's own name ("LL144", "DCWP")
            if re.match(r"\s+\(?\d", text[m.end() :]) and word.lower() in english_words():
                continue  # a numbered part: "Document 27", "Article 50" (but "WidgetPro 3000" is a name)
            if _PLAIN.search(text, 0, m.start()) and word.lower() in place_and_language_names():
                continue  # "in plain English": how to say it, not a language the law is about
            if _WHERE_SOMEONE_IS.search(text, 0, m.start()):
                continue
            if _never_used(terms, stats) and not (
                _known_alternative(text, m, stats) or _example_of_known_kind(text, m, stats)
            ):
                names.append(word)
        for m in _LOWER_WORD.finditer(text):  # "in spanish", "we also hire in illinois"
            word = m.group(0)
            if _PLAIN.search(text, 0, m.start()) or _WHERE_SOMEONE_IS.search(text, 0, m.start()):
                continue
            if word in place_and_language_names() and _never_used(content_terms(word), stats):
                names.append(word.capitalize())
    return names + [name for name in other_laws(question, stats, known) if name not in names]


# The laws of a place: "the Colorado AI Act", "Illinois law", "California's rules", "what does the UK
# require", what its regulator expects ("the UK's AI regulator"), and "their laws" for the places a
# statement before the question names ("We also hire in Colorado and Illinois. Do their AI hiring
# laws require the same audit?").
_LAW_WORD = (
    r"(?:acts?|laws?|legislation|regulations?|rules|statutes?|bills?|ordinances?|regulators?|government)"
)
_PLACE_LAW = re.compile(rf"^(?:['’]s?)?\s+(?:(?:[\w-]+\s+){{0,3}}?{_LAW_WORD}|requires?|expects?)\b", re.IGNORECASE)
_THEIR_LAWS = re.compile(r"\b(?:their|those|these)\s+(?:[\w-]+\s+){0,3}?(?:laws|legislation|statutes|acts)\b", re.IGNORECASE)
# Short names of countries users type in capitals, and never mean as an ordinary word.
_COUNTRY_ABBREVIATIONS = re.compile(r"(?<![\w.])(?:U\.?K\.?|U\.?S\.?A?\.?)(?![\w.])")
# ... also in the possessive ("Illinois' AI video interview law", "Colorado's act")
_CAPITALISED = re.compile(r"(?<![\w'’])[A-Z][a-z]{2,}(?:\s+[A-Z][a-z]{2,})?(?=['’]s?(?!\w)|(?![\w'’]))")


def _says_nothing(term: str, stats: TermStats) -> bool:
    """Whether a word the collection never uses says nothing of what is asked: a filler or a verb
    of any action (`_FILLER_WORDS`, `_NO_TOPIC_WORDS`), a two-letter abbreviation ("AI", "HR": the
    collection's subject in users' words, or too short to tell), a word derived from one it uses
    ("screener"), or one edit from one or from a stop word (a typo: "canidates", "befor")."""
    if term in _FILLER_WORDS or term in _NO_TOPIC_WORDS or len(term) <= 2:
        return True
    if any(stats.doc_freq.get(term[:n], 0) for n in range(5, len(term))):
        return True  # a word derived from one it uses: "screener" of "screen"
    # one edit from a word it uses, or a stop word with a letter dropped or two swapped ("hav",
    # "befor", "teh")
    return any(
        stats.doc_freq.get(w, 0) or ((len(w) == len(term) + 1 or sorted(w) == sorted(term)) and not content_terms(w))
        for w in one_edit(term)
    )


def _never_used(terms: Sequence[str], stats: TermStats) -> bool:
    """Whether the collection uses none of `terms`."""
    return all(stats.doc_freq.get(t, 0) == 0 for t in terms)


def other_laws(question: str, stats: TermStats, known: frozenset[str] = frozenset()) -> list[str]:
    """Places the collection never names whose own laws the message asks about ("... the Colorado
    AI Act - does it have the same deadlines?"): the regulations cannot say what another
    jurisdiction requires. A place's law named in a statement only sets the scene ("We follow
    Illinois rules already. Do we need a bias audit for NYC?"), unless the question asks about
    "their laws"; a place alone is never one of these ("We're hiring in Berlin. ...")."""
    asking = " ".join(asking_sentences(question))
    if _THEIR_LAWS.search(asking):
        return list(dict.fromkeys(name for name, _ in _unknown_places(question, stats, known)))
    return list(dict.fromkeys(name for name, end in _unknown_places(asking, stats, known) if _PLACE_LAW.match(asking[end:])))


def _unknown_places(text: str, stats: TermStats, known: frozenset[str]) -> list[tuple[str, int]]:
    """The places in `text` the collection never names, each with where it ends."""
    def unknown(word: str) -> bool:
        terms = content_terms(word)
        return bool(terms) and word.lower() not in known and _never_used(terms, stats)

    places: list[tuple[str, int]] = []
    for m in _CAPITALISED.finditer(text):
        words = [w for w in m.group(0).split() if w.lower() in place_and_language_names()]
        places.extend((w, m.end()) for w in words[:1] if unknown(w))
    for m in re.finditer(r"\b[a-z]{3,}\b", text):
        if m.group(0) in place_and_language_names() and unknown(m.group(0)):
            places.append((m.group(0).capitalize(), m.end()))
    places.extend((m.group(0), m.end()) for m in _COUNTRY_ABBREVIATIONS.finditer(text))
    return places


# "national regulators or Brussels?", "Brussels or the member states?": the phrase across the "or"
# (up to three words: "the national MSAs or Brussels" is national authorities or the Commission).
_OR_BEFORE = re.compile(r"((?:[\w-]+\s+){0,2}[\w-]+)\s+or\s+(?:the\s+)?$", re.IGNORECASE)
_OR_AFTER = re.compile(r"^\s+or\s+(?:the\s+)?((?:[\w-]+\s+){0,2}[\w-]+)", re.IGNORECASE)


def _known_alternative(text: str, name: re.Match, stats: TermStats) -> bool:
    """The name is one side of an either/or whose other side the collection uses: the question asks
    which of the two, and the regulations can say ("national regulators or Brussels?")."""
    before = _OR_BEFORE.search(text[: name.start()])
    after = _OR_AFTER.match(text[name.end() :])
    # The words next to the "or", up to a word like "in" or "the" ("buyers in Illinois or ...": Illinois).
    others = []
    if before is not None:
        others.append(_next_to_or(before.group(1).split()[::-1]))
    if after is not None:
        others.append(_next_to_or(after.group(1).split()))
    return any(stats.doc_freq.get(t, 0) > 0 for words in others for t in content_terms(" ".join(words)))


def _example_of_known_kind(text: str, name: re.Match, stats: TermStats) -> bool:
    """The name is an example of a kind of thing the collection speaks of ("an EU agency like
    Frontex", "a chatbot such as WidgetBot"): the question is about that kind, which the regulations
    can answer. A place is never such an example ("a state like Illinois" asks about its law)."""
    kind = _EXAMPLE_BEFORE.search(text[: name.start()])
    if kind is None or name.group(0).lower() in place_and_language_names():
        return False
    return any(stats.doc_freq.get(t, 0) > 0 for t in content_terms(kind.group(1)))


def _next_to_or(words: list[str]) -> list[str]:
    """The words nearest the "or" (listed from it outwards) before the first stop word."""
    run = []
    for word in words:
        if word.lower() in STOPWORDS:
            break
        run.append(word)
    return run


def _laws_words_naming(expansions: Sequence[tuple[str, str]], terms: frozenset[str] | set[str]) -> list[frozenset[str]]:
    """The law's words (as key terms) for each phrasing as typed that holds one of `terms`."""
    return [frozenset(content_terms(law)) for typed, law in expansions if set(content_terms(typed)) & terms]


def _in_the_laws_words(
    about: dict[str, float], expansions: Sequence[tuple[str, str]], stats: TermStats
) -> dict[str, float]:
    """`about` with a user's phrase the collection never uses ("fine" in LL144, which says "civil
    penalty"; "GPAI") replaced by the law's words for it (`expansions`: (as typed, the law's words),
    from the glossary and the abbreviations): no clause can hold the user's word, so the value would
    be bound to nothing. A phrase the collection does use keeps its own words (counting the law's
    words for it too answered a question the law does not: docs/RESULTS.md)."""
    for typed, law in expansions:
        typed_terms = set(content_terms(typed))
        if not typed_terms or any(stats.doc_freq.get(t, 0) for t in typed_terms):
            continue
        about = {t: w for t, w in about.items() if t not in typed_terms}
        about.update({t: stats.idf(t) for t in content_terms(law) if stats.doc_freq.get(t, 0) and t not in about})
    return about


# A sentence speaks of a side of a comparison when it holds this share of the side's key terms.
_SIDE_COVERED = 0.5
# ... and of a part of a message asking several things when it holds this share of the part's.
_PART_COVERED = 0.5


@dataclass(frozen=True)
class _Side:
    """One side of a comparison: its key terms by idf, and the law's words for those a user typed in
    words of their own that the law also uses elsewhere ("outside applicants": the notice rule says
    "candidate for employment"; the law's "applicants" are those of the bias audit's sample)."""

    terms: dict[str, float]
    law_words: dict[str, tuple[frozenset[str], ...]]

    def coverage(self, terms: frozenset[str]) -> float:
        """The share of the side's key terms `terms` holds, in the user's words or the law's."""
        held = set(terms) | {t for t, laws in self.law_words.items() if any(law <= terms for law in laws)}
        return _coverage(held, self.terms)


def _used_terms(
    terms: Iterable[str], expansions: Sequence[tuple[str, str]], stats: TermStats
) -> dict[str, float]:
    """`terms` by idf, a user's phrase the law never uses in the law's words for it (`expansions`,
    those of the text the terms are from), only those the collection uses."""
    weighted = _in_the_laws_words({t: stats.idf(t) for t in terms}, expansions, stats)
    return {t: w for t, w in weighted.items() if stats.doc_freq.get(t, 0)}


def _law_words_for(
    terms: dict[str, float], expansions: Sequence[tuple[str, str]], stats: TermStats
) -> dict[str, tuple[frozenset[str], ...]]:
    """For each of `terms` the user typed, the law's words for it (`expansions`), those the
    collection uses. A glossary's commas part names the law has for one thing ("market surveillance
    authority, national competent authority"): each is the law's words for it on its own."""
    out: dict[str, tuple[frozenset[str], ...]] = {}
    for typed, law in expansions:
        held_by = set(content_terms(typed)) & set(terms)
        for name in law.split(","):
            words = frozenset(t for t in content_terms(name) if stats.doc_freq.get(t, 0))
            if not words:
                continue
            for t in held_by:
                out[t] = (*out.get(t, ()), words)
    return out


def _provision(chunk: Chunk) -> tuple[str, str]:
    """The provision a chunk is part of: its document and heading (§ 5-304's (b) and (c) share one);
    a chunk without a heading is a provision of its own."""
    return chunk.doc_id, chunk.heading.strip() or chunk.label


def _speaks_of(text: str, terms: frozenset[str], side: _Side) -> bool:
    """Whether a sentence is about one side of a comparison: a definition only of what it defines
    ("'distributor' means … other than the provider or the importer" is not about the importer)."""
    defined = [frozenset(content_terms(name)) for name in defined_names(text)]
    if defined:
        return any(side.coverage(name) >= _SIDE_COVERED for name in defined)
    return side.coverage(terms) >= _SIDE_COVERED


def _joined(names: list[str]) -> str:
    names = list(dict.fromkeys(names))
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]


# "What is the definition of 'X'?", "what does “X” mean", "what counts as 'X'", "meaning of 'X'".
_DEFINE_QUOTED = re.compile(
    r"(?:definition of|meaning of|what (?:is|are|counts as|qualifies as) (?:an? |the )?|what does|define|defines)\s*"
    r"[‘“'\"](?P<term>[^‘’“”'\"]{3,80}?)[’”'\"]",
    re.IGNORECASE,
)


def _without_named_heading(quote: str, name: str) -> str:
    """`quote` without the heading joined to its sentence ("b. Notices required. In the city, ...")
    when the provision's name, given in words before the quote, already says it: quoted too, it would
    read as part of the rule. A heading that says more ("2. Critical infrastructure: AI systems ...",
    under "Annex III(2) (High-risk AI systems referred to in Article 6(2))") stays."""
    start = after_heading(quote)
    if start and set(content_terms(quote[:start])) <= set(content_terms(name)):
        return quote[start:]
    return quote


def _defines_asked_term(question: str, chunks: Sequence[Chunk]) -> bool:
    """Whether `question` asks what a term means and one of `chunks` is a definition of it."""
    if not asks_definition(question):
        return False
    asked = _padded_terms(question)
    return any(_defines_a_term_of(chunk, asked) for chunk in chunks)


def _padded_terms(question: str) -> str:
    """The question's key terms, space-separated and space-padded, for finding a stemmed phrase in them."""
    return f" {' '.join(content_terms(question))} "


def _defines_a_term_of(chunk: Chunk, asked: str) -> bool:
    """Whether `chunk` is a definition of a term among `asked` (`_padded_terms` of a question)."""
    return role_of(chunk) == "definition" and any(f" {term} " in asked for term in defined_terms(chunk))


def defined_term_asked(question: str) -> list[str]:
    """The stemmed terms a question asks the definition of, when it puts them in quotes."""
    found = (" ".join(content_terms(m.group("term"))) for m in _DEFINE_QUOTED.finditer(question))
    return [term for term in found if term]


def provision_name(chunk: Chunk, quote: str) -> str:
    """How the answer names a provision in words: its citation label, narrowed to the item the quote
    opens with ("Annex III(4)" quoting "(a) AI systems ..." -> "Annex III(4)(a)"; "Art. 9(1)–(2)"
    quoting "2. The risk ..." -> "Art. 9(2)"), with its heading ("(Penalties)")."""
    label = chunk.label
    m = _ENUMERATOR.match(quote)
    if m:
        item = m.group("paren") or m.group("dot")
        ranged = re.match(r"^(.*?)\(([^()]+)\)–\(([^()]+)\)$", label)
        if ranged and item in (ranged.group(2), ranged.group(3)):
            label = f"{ranged.group(1)}({item})"
        elif not label.endswith(f"({item})") and f"({item})" not in label and not ranged:
            label = f"{label}({item})"
    heading = chunk.heading.strip().rstrip(".`")
    return f"{label} ({heading})" if heading else label


def candidate_sentences(chunks: Sequence[Chunk]) -> list[str]:
    """The units the generator may quote from these chunks (ingest embeds them ahead of time)."""
    return [chunk.text[a:b] for chunk in chunks for a, b in quotable_spans(chunk.text)]


# The operators the EU AI Act (as product-safety law does) assigns duties to, as a question or a
# sentence names them; LL144's employers and agencies are named together, so it has none of them.
_ROLES = r"providers?|deployers?|importers?|distributors?|notified bod(?:y|ies)|authori[sz]ed representatives?"
_ROLE = re.compile(rf"\b({_ROLES})\b", re.I)
# ... as the subject a sentence opens with ("9. Notified bodies shall ...", "(a) the provider ...").
_ROLE_SUBJECT = re.compile(rf"^\W*(?:(?:\d{{1,3}}\.|\([a-z0-9]{{1,4}}\))\s+)*(?:the\s+|a\s+|an\s+)?({_ROLES})\b", re.I)


def _role(name: str) -> str:
    """A role's name in the singular, lower case: "Notified bodies" -> "notified body"."""
    name = " ".join(name.lower().split())
    return name[:-3] + "y" if name.endswith("ies") else name[:-1] if name.endswith("s") else name


def _role_subject(text: str) -> str | None:
    m = _ROLE_SUBJECT.match(text)
    return _role(m.group(1)) if m else None


_WORD = re.compile(r"[^\W\d_]{3,}")  # a word of three letters or more
_FIGURE = re.compile(r"[$€£]?\.?\d[\d.,]*%?")
_MEASURE = re.compile(r"\d*\.\d+%?[.,;]?|\d+%[.,;]?")  # a rate or ratio: "54.3%", "0.82", "25%"
_TABLE_ASKED = frozenset({"exampl", "sampl", "tabl"})  # stems of "example", "sample", "table"


def _is_table(text: str) -> bool:
    """Table rows run together: rates and ratios among a few labels (a list of cross-referenced
    points, "points 1 to 10, with the exception of points 6, 8 and 9", is not one)."""
    tokens = text.split()
    figures = sum(1 for t in tokens if _FIGURE.fullmatch(t))
    measures = sum(1 for t in tokens if _MEASURE.fullmatch(t))
    return len(tokens) >= 12 and figures >= 0.2 * len(tokens) and measures >= 3


def _sentences(chunks: list[Chunk]) -> list[_Sentence]:
    out: list[_Sentence] = []
    for rank, chunk in enumerate(chunks):
        text = chunk.text
        for a, b in quotable_spans(text):
            trimmed = trim_markup(text, _after_heading_lines(text, a, b, chunk.heading), b)
            if trimmed is None:  # "**(a)** A seller ..." once "## § 2 Notice." is gone
                continue
            start, end = trimmed
            quote = text[start:end]
            if len(quote.split()) < MIN_QUOTE_WORDS or not any(ch.islower() for ch in quote) or not _WORD.search(quote):
                continue  # a page number, a running header, a bare heading, a drafter's stamp ("SJ/ IB LS #11903 11:32 pm")
            out.append(_Sentence(rank, start, end, text[a:b], frozenset(content_terms(quote))))
    return out


def _after_heading_lines(text: str, a: int, b: int, heading: str) -> int:
    """Where the sentence proper starts: past the unit's label and heading lines ("Article 4\\nAI
    literacy\\nProviders and deployers ..." quotes from "Providers"), and past a label and heading
    that open its first line ("§ 20-872 Penalties. a. Any person ..." quotes from "a."). A span that
    is nothing but a heading ("§ 5-304 Notice to Candidates and Employees.") starts at its end."""
    keys = _heading_keys(heading)
    start = a
    wrapped = False  # the line before was a heading that runs on ("... classified by the provider as")
    while True:
        newline = text.find("\n", start, b)
        line = text[start : newline if newline >= 0 else b].strip()
        if not (_is_heading_line(line, keys) or (wrapped and _continues_heading(line))):
            break
        wrapped = _RUNS_ON.search(line) is not None and _heading_key(line) in keys
        if newline < 0:
            return b
        start = newline + 1
    inline = _INLINE_LABEL.match(text, start, b)
    if inline is not None:
        rest = text[inline.end() : b]
        for key in sorted(keys, key=len, reverse=True):
            if rest.lower().startswith(key):
                after = inline.end() + len(key)
                after += len(text[after:b]) - len(text[after:b].lstrip(". "))
                return after if after < b else b
    return start


# A heading cut by the PDF's line wrap ends in a word no heading ends in: its next line runs on
# ("Procedure for dealing with AI systems classified by the provider as" / "non-high-risk in
# application of Annex III"), short and without a sentence's end.
_RUNS_ON = re.compile(r"\b(?:as|of|the|and|for|to|by|in|with|on|or|a|an)$", re.IGNORECASE)


def _continues_heading(line: str) -> bool:
    return 0 < len(line.split()) <= MAX_HEADING_WORDS and not line.endswith((".", ";", ":", ","))


# A section label opening a line: "§ 20-872 ", "§ 5-300. ".
_INLINE_LABEL = re.compile(r"§+\s*[\d-]+\.?\s+")


def _heading_keys(heading: str) -> set[str]:
    """A unit's heading and, for "Definitions — Bias Audit", its parent heading, as compared."""
    full = _heading_key(heading)
    return {k for k in (full, full.split(" — ")[0].strip().rstrip(".")) if k}


def _heading_key(text: str) -> str:
    """A heading as headings are compared: one space between words, lower case, no final stop."""
    return " ".join(text.split()).lower().rstrip(".")


def _is_heading_line(line: str, keys: set[str]) -> bool:
    return bool(line) and bool(
        _HEADING_LINE.match(line)
        or _heading_key(line) in keys
        or (line.startswith("§") and len(line.split()) <= MAX_HEADING_WORDS)  # "§ 5-301 Bias Audit."
    )


def _unclipped(weights: dict[str, float], stats: TermStats) -> dict[str, float]:
    """The question's key terms with clipped words the collection never uses ("docs", "tech", "rep")
    replaced by the most used of its words they begin ("document", "technic", "repres")."""
    out: dict[str, float] = {}
    for term, weight in weights.items():
        if stats.doc_freq.get(term, 0) == 0 and len(term) >= 3:
            longer = [t for t in stats.doc_freq if t.startswith(term)]
            if longer:
                term = max(longer, key=lambda t: (stats.doc_freq[t], t))
                weight = stats.idf(term)
        out[term] = max(weight, out.get(term, 0.0))
    return out


def _opens_list(sentence: str) -> bool:
    """Whether a sentence is a lead-in the answer quotes with its list items (`_with_list`)."""
    return sentence.rstrip().endswith(":")


def _list_items_terms(sentences: list[_Sentence], chunks: list[Chunk]) -> list[frozenset[str]]:
    """Per sentence: when it leads a list (ends in ':'), the terms of the list items after it in its
    provision; otherwise nothing."""
    found: list[frozenset[str]] = []
    for i, s in enumerate(sentences):
        terms: set[str] = set()
        if leads_a_list(s.text(chunks)):
            for after in sentences[i + 1 :]:
                if after.rank != s.rank or not _LIST_ITEM.match(after.text(chunks)):
                    break
                terms |= after.terms
        found.append(frozenset(terms))
    return found


def _without_overlaps(chosen: list[_Sentence]) -> list[_Sentence]:
    """The chosen sentences without one that another already quotes (a list item chosen on its own
    and again with its lead-in), in the same order."""
    kept: list[_Sentence] = []
    for s in sorted(chosen, key=lambda s: -(s.end - s.start)):  # longest first: they swallow the others
        if not any(k.rank == s.rank and k.start < s.end and s.start < k.end for k in kept):
            kept.append(s)
    return [s for s in chosen if s in kept]


def _coverage(terms: frozenset[str] | set[str], weights: dict[str, float]) -> float:
    total = sum(weights.values())
    return sum(w for t, w in weights.items() if t in terms) / total if total else 0.0


def _near_duplicate(a: _Sentence, b: _Sentence, threshold: float = 0.8) -> bool:
    """The same rule worded for another audience ("to candidates" / "to employees") adds nothing."""
    union = a.terms | b.terms
    return bool(union) and len(a.terms & b.terms) / len(union) >= threshold
