"""A collection's own vocabulary, used to meet users' spelling and abbreviations before search.

People type "how oftn must a bias audti be done" and "what must a GPAI provider publish?". BM25 finds
nothing for "audti", and neither the embedding model nor BM25 knows that the EU AI Act's
"general-purpose AI" is what users call GPAI. Both are repaired from the collection's own text:

* **spelling**: a word that is neither in the collection nor an English word (SymSpell's bundled
  English frequency list) is replaced by the nearest word that starts with the same letter: a
  collection word within one edit (two for long words; SymSpell's symmetric-delete lookup) or an
  English word within one edit ("procotring" -> "proctoring", which the law never uses but the
  embedding model knows), the fewer edits winning, then the collection's word, then the more frequent;
* **chat shortenings**: "wat r", "ppl" are read as the words they stand for;
* **compounds**: a word the collection never uses that is two of its words it writes apart
  ("deepfakes" -> "deep fakes"), and two words the question writes apart that the collection writes
  as one ("cyber security" -> "cybersecurity");
* **abbreviations**: an upper-case token is followed by its long form when the text defines it
  ("automated employment decision tools (“AEDT”)", found by core/kg/normalize.py) or, for a token the
  text never uses, when it spells the initials of a phrase the text uses at least twice
  ("general-purpose AI" -> GPAI, "quality management system" -> QMS).

Nothing is learned from questions; everything comes from the indexed text, so a new collection gets its
own lexicon at the first question after ingest.
"""
from __future__ import annotations

import re
import threading
from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from typing import Iterable

from core.glossary import Glossary
from core.kg.normalize import MINOR_WORDS, find_abbreviations
from core.text import STOPWORDS

_WORD = re.compile(r"[A-Za-z][A-Za-z'-]*[A-Za-z]|[A-Za-z]")
_LOWER_WORD = re.compile(r"[a-z]+")
_ACRONYM = re.compile(r"^[A-Z][A-Z0-9]{1,6}s?$")
# A phrase must recur to stand for an abbreviation; three letters match many chance phrases
# ("available technical solutions" for ATS), so those need a phrase the text keeps using.
MIN_PHRASE_COUNT = 3
MIN_PHRASE_COUNT_3_LETTERS = 8
MIN_ACRONYM_LETTERS = 3
MAX_PHRASE_WORDS = 5
# Compounds: each part has at least this many letters ("deep" + "fakes"), and the text must use the
# two words together (or the joined word) more than once before a question's words are read so.
MIN_COMPOUND_PART = 3
MIN_COMPOUND_COUNT = 2
_WORD_PAIR = re.compile(r"\b([A-Za-z]{3,})(?=(?P<gap>[ \t]+)([A-Za-z]{3,})\b)")


@dataclass(frozen=True)
class NormalisedQuestion:
    text: str  # the question with corrections and expansions applied: what is searched
    corrections: tuple[tuple[str, str], ...] = ()  # (as typed, as read)
    expansions: tuple[tuple[str, str], ...] = ()  # (abbreviation, long form)
    # Corrections only: what the answer is judged against. An expansion adds the law's own
    # frequent words ("automated employment decision tools"), which would make any provision seem
    # to be about the question.
    corrected: str = ""

    def __post_init__(self) -> None:
        if not self.corrected:
            object.__setattr__(self, "corrected", self.text)

    @property
    def changed(self) -> bool:
        return bool(self.corrections or self.expansions)


@lru_cache(maxsize=1)
def english_words() -> dict[str, int]:
    """SymSpell's English frequency dictionary (82,765 words -> corpus counts)."""
    path = resources.files("symspellpy") / "frequency_dictionary_en_82_765.txt"
    words: dict[str, int] = {}
    with path.open(encoding="utf-8") as f:
        for line in f:
            word, _, count = line.strip().partition(" ")
            if word and count.isdigit():
                words[word] = int(count)
    return words


_LETTERS = "abcdefghijklmnopqrstuvwxyz"


def one_edit(word: str) -> set[str]:
    """Every string one deletion, transposition, replacement or insertion away from `word`."""
    splits = [(word[:i], word[i:]) for i in range(len(word) + 1)]
    deletes = {a + b[1:] for a, b in splits if b}
    transposes = {a + b[1] + b[0] + b[2:] for a, b in splits if len(b) > 1}
    replaces = {a + c + b[1:] for a, b in splits if b for c in _LETTERS}
    inserts = {a + c + b for a, b in splits for c in _LETTERS}
    return deletes | transposes | replaces | inserts


@dataclass
class Lexicon:
    words: Counter  # lower-case words of the collection with their counts
    defined: dict[str, str] = field(default_factory=dict)  # abbreviation (lower) -> long form, as defined
    initials: dict[str, str] = field(default_factory=dict)  # letters (lower) -> frequent phrase
    pairs: frozenset[str] = frozenset()  # "deep fake": adjacent lower-case words the text repeats (_pair)
    max_edits_long: int = 2  # for words of 8 letters or more; 1 below
    glossary: Glossary = field(default_factory=Glossary)  # users' words -> the law's (core/glossary.py)
    _speller: object = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def from_texts(cls, texts: Iterable[str], glossary: Glossary | None = None) -> "Lexicon":
        texts = list(texts)
        words: Counter = Counter()
        phrases: Counter = Counter()
        pairs: Counter = Counter()
        for text in texts:
            tokens = _WORD.findall(text)
            lower = [w for t in tokens for w in t.lower().split("-") if w]
            pairs.update(_pair(a, b) for a, b in zip(lower, lower[1:]))
            words.update(t.lower() for t in tokens for t in t.split("-"))
            words.update(t.lower() for t in tokens if "-" in t)
            for n in range(2, MAX_PHRASE_WORDS + 1):
                for i in range(len(tokens) - n + 1):
                    gram = tokens[i : i + n]
                    if gram[0].lower() in MINOR_WORDS or gram[-1].lower() in MINOR_WORDS:
                        continue
                    if any(w.lower() in STOPWORDS and w.lower() not in MINOR_WORDS for w in gram):
                        continue
                    phrases[" ".join(gram)] += 1
        whole = "\n".join(texts)
        aliases = find_abbreviations(whole)
        defined = {}
        for alias, canonical in aliases.to_canonical.items():
            if alias.replace(" ", "").isalnum() and " " not in alias:
                defined[alias] = aliases.names.get(canonical, canonical)
        initials: dict[str, tuple[int, str]] = {}
        for phrase, count in phrases.items():
            if count < MIN_PHRASE_COUNT:
                continue
            letters = _initials(phrase.split())
            if letters is None or len(letters) < MIN_ACRONYM_LETTERS:
                continue
            if len(letters) == MIN_ACRONYM_LETTERS and count < MIN_PHRASE_COUNT_3_LETTERS:
                continue
            best = initials.get(letters)
            if best is None or count > best[0]:
                initials[letters] = (count, phrase)
        return cls(
            words=words,
            defined=defined,
            initials={k: v[1] for k, v in initials.items()},
            pairs=frozenset(p for p, n in pairs.items() if n >= MIN_COMPOUND_COUNT),
            glossary=(glossary or Glossary()).unused_in(whole),
        )

    # -- reading a question ----------------------------------------------------------------------

    def normalise(self, question: str) -> NormalisedQuestion:
        corrections: list[tuple[str, str]] = []
        expansions: list[tuple[str, str]] = []
        english = english_words()
        question = self._joined(question, corrections)
        searched: list[str] = []
        corrected: list[str] = []
        pos = 0
        for m in _WORD.finditer(question):
            token = m.group(0)
            as_read = as_searched = token
            long_form = self._long_form(token, question)
            if long_form is not None:
                expansions.append((token, long_form))
                as_searched = f"{token} ({long_form})"
            else:
                fixed = (
                    _chat_word(token, question[max(0, m.start() - 1) : m.start()], question[m.end() : m.end() + 2])
                    or self._split(token, english)
                    or (None if _names_something(token, question[: m.start()]) else self._correct(token, english))
                )
                if fixed is not None:
                    corrections.append((token, fixed))
                    as_read = as_searched = fixed
            between = question[pos : m.start()]
            searched += [between, as_searched]
            corrected += [between, as_read]
            pos = m.end()
        searched.append(question[pos:])
        corrected.append(question[pos:])
        text, glossed = self.glossary.expand("".join(searched))
        return NormalisedQuestion(text, tuple(corrections), tuple(expansions) + glossed, "".join(corrected))

    def abbreviations(self, text: str) -> list[tuple[str, str]]:
        """(abbreviation, long form) of each abbreviation in `text` that `normalise` expands ("GPAI"
        -> "general-purpose AI"), without correcting anything."""
        found = ((m.group(0), self._long_form(m.group(0), text)) for m in _WORD.finditer(text))
        return [(token, long_form) for token, long_form in found if long_form is not None]

    def _joined(self, question: str, corrections: list[tuple[str, str]]) -> str:
        """`question` with two adjacent words joined where the collection writes them as one word and
        hardly ever apart ("cyber security" -> "cybersecurity"); each join is added to `corrections`."""
        out: list[str] = []
        pos = 0
        for m in _WORD_PAIR.finditer(question):  # overlapping pairs: the lookahead holds the second word
            if m.start() < pos:
                continue
            first, second = m.group(1), m.group(3)
            joined = (first + second).lower()
            if (
                first.lower() in STOPWORDS  # "any one" is not "anyone"
                or second.lower() in STOPWORDS
                or self.words.get(joined, 0) < MIN_COMPOUND_COUNT
                or _pair(first.lower(), second.lower()) in self.pairs
            ):
                continue
            end = m.end(1) + len(m.group("gap")) + len(second)
            corrections.append((question[m.start() : end], joined))
            out += [question[pos : m.start()], joined]
            pos = end
        out.append(question[pos:])
        return "".join(out)

    def _split(self, token: str, english: dict[str, int]) -> str | None:
        """"deep fakes" for "deepfakes": a word that is neither the collection's nor English and is two
        of the collection's words it writes next to each other (the second may carry a plural "s");
        None otherwise ("processors" is an English word, not "process ors")."""
        word = token.lower()
        if len(word) < 2 * MIN_COMPOUND_PART or not word.isalpha() or word in self.words or word in english:
            return None
        for i in range(MIN_COMPOUND_PART, len(word) - MIN_COMPOUND_PART + 1):
            first, second = word[:i], word[i:]
            pair = _pair(first, second)
            if first in STOPWORDS or pair.split()[1] in STOPWORDS:  # a stop word is never a part
                continue
            if pair in self.pairs:
                return f"{first} {second}"
        return None

    def _long_form(self, token: str, question: str) -> str | None:
        if not _ACRONYM.match(token):
            return None
        key = token[:-1] if token.endswith("s") and len(token) > 2 else token
        key = key.lower()
        long_form = self.defined.get(key)
        used = {key, key + "s", token.lower()} & self.words.keys()  # the text's own word, not an abbreviation
        if long_form is None and not used and len(key) >= MIN_ACRONYM_LETTERS:
            long_form = self.initials.get(key)
        if long_form is None or long_form.lower() in question.lower():
            return None
        return long_form

    def _correct(self, token: str, english: dict[str, int]) -> str | None:
        word = token.lower()
        if len(word) < 4 or not word.isalpha() or _ACRONYM.match(token):  # "SMEs" is no misspelling
            return None
        if any(c.isupper() for c in token[1:]):  # written so on purpose: "SaaS", "OpenAI", "iOS"
            return None
        if word in self.words or word in english:
            return None
        from symspellpy import Verbosity

        edits = self.max_edits_long if len(word) >= 8 else 1
        # (edits, 0 for two letters swapped ("lable" is "label" before "liable") / 1 for any other edit,
        # 0 for the collection's word / 1 for a general English one, -count, word): min wins.
        candidates = [
            (s.distance, int(not _swapped(word, s.term)), 0, -s.count, s.term)
            for s in self._spelling().lookup(word, Verbosity.CLOSEST, max_edit_distance=edits)
            if s.term[0] == word[0]
        ]
        candidates += [
            (1, int(not _swapped(word, w)), 1, -english[w], w) for w in one_edit(word) if w in english and w[0] == word[0]
        ]
        if not candidates:
            return None
        best = min(candidates)[-1]
        return best if token.islower() else best.capitalize()

    def _spelling(self):  # -> symspellpy.SymSpell
        with self._lock:
            if self._speller is None:
                from symspellpy import SymSpell

                speller = SymSpell(max_dictionary_edit_distance=self.max_edits_long, prefix_length=7)
                for word, count in self.words.items():
                    if len(word) >= 3 and _LOWER_WORD.fullmatch(word):
                        speller.create_dictionary_entry(word, count)
                self._speller = speller
            return self._speller


def _names_something(token: str, before: str) -> bool:
    """A capitalised word inside a sentence is a name ("Frontex", "Europol") the collection need not
    contain, not a misspelling of one of its words; at a sentence's start the capital says nothing."""
    line = before.rstrip(" \t")
    starts = line == "" or line.endswith("\n") or line.rstrip().endswith((".", "?", "!", ":"))
    return token[:1].isupper() and not starts


# How people shorten words in chat ("wat r the penalties", "do u need ppl's consent"): too
# short for spelling correction, and not the law's words.
_CHAT_WORDS = {
    "wat": "what", "wut": "what", "wht": "what", "r": "are", "u": "you", "ur": "your",
    "abt": "about", "bc": "because", "cuz": "because", "coz": "because", "thru": "through", "tho": "though",
    "ppl": "people", "yr": "year", "yrs": "years", "govt": "government", "dept": "department", "pls": "please",
    "plz": "please", "calc": "calculation", "calcs": "calculations", "comms": "communications", "dev": "developer",
    "devs": "developers", "shud": "should", "math": "mathematics", "recog": "recognition", "info": "information",
    "reqs": "requirements", "regs": "regulations",
}
# Contractions typed without the apostrophe: the nearest word would be another ("dont" -> "done",
# "arent" -> "agent", "theyre" -> "there"). "wont", "were", "its", "lets" and "well" are words.
_CONTRACTIONS = {
    "dont": "don't", "doesnt": "doesn't", "didnt": "didn't", "isnt": "isn't", "arent": "aren't",
    "wasnt": "wasn't", "werent": "weren't", "cant": "can't", "couldnt": "couldn't", "shouldnt": "shouldn't",
    "wouldnt": "wouldn't", "havent": "haven't", "hasnt": "hasn't", "hadnt": "hadn't", "mustnt": "mustn't",
    "neednt": "needn't", "theyre": "they're", "youre": "you're", "weve": "we've", "ive": "I've", "im": "I'm",
    "theyve": "they've", "youve": "you've", "whats": "what's", "thats": "that's", "theres": "there's",
    "whos": "who's", "hows": "how's", "wheres": "where's", "itll": "it'll", "theyll": "they'll",
}


def _chat_word(token: str, before: str, after: str) -> str | None:
    """The word a lower-case chat shortening stands for ("ppl's" -> "people's", "dont" -> "don't"); None for any other
    token, for a letter that numbers a point ("point (r)") and for one inside an abbreviation ("u.s.",
    "r&d"). `before` and `after` are the characters around the token."""
    contraction = _CONTRACTIONS.get(token.lower())
    if contraction is not None and (token.islower() or token[1:].islower()):
        return contraction if token.islower() or contraction[0] == "I" else contraction.capitalize()
    if not token.islower() or before == "(" or re.match(r"[.&/][A-Za-z]", after):
        return None
    word, apostrophe, rest = token.partition("'")
    long = _CHAT_WORDS.get(word)
    return None if long is None else long + apostrophe + rest


def _swapped(typed: str, word: str) -> bool:
    """`word` is `typed` with two adjacent letters swapped back ("lable" -> "label")."""
    if len(typed) != len(word) or typed == word:
        return False
    diff = [i for i, (a, b) in enumerate(zip(typed, word)) if a != b]
    return len(diff) == 2 and diff[1] == diff[0] + 1 and typed[diff[0]] == word[diff[1]] and typed[diff[1]] == word[diff[0]]


def _pair(first: str, second: str) -> str:
    """Two adjacent words as the pairs are kept: the second without a plural "s" ("deep fake(s)")."""
    return f"{first} {second[:-1] if second.endswith('s') else second}"


def _initials(words: list[str]) -> str | None:
    """The letters an abbreviation of `words` would have: initials, both letters of a hyphenated
    word ("general-purpose" -> gp), every letter of a short upper-case word ("AI" -> ai); minor
    words are skipped. None when a word has no letter to give."""
    letters = []
    for word in words:
        if word.lower() in MINOR_WORDS:
            continue
        if word.isupper() and len(word) <= 4:
            letters.append(word.lower())
        elif "-" in word:
            parts = [p for p in word.split("-") if p]
            if not parts:
                return None
            letters.append("".join(p[0].lower() for p in parts))
        else:
            letters.append(word[0].lower())
    return "".join(letters) or None
