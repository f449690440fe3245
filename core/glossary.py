"""A collection's glossary: the words users say for what the law calls otherwise.

Users ask about "chatbots", "kill switches" and "careers pages"; the EU AI Act speaks of "AI systems
intended to interact directly with natural persons", a "stop button … in a safe state", and LL144's
rules of "the employment section of its website". Neither the embedding model nor BM25 can know
that, and the collection's text does not say it (core/lexicon.py repairs what the text does say:
spelling, abbreviations, compounds). A glossary is a short file a compliance team keeps per
collection, `"the law's words" = ["what users say", ...]`; a question that uses a user's phrase is
searched with the law's words added after it, "chatbot (AI systems intended to interact directly
with natural persons)", like an abbreviation's long form. What is searched changes; the answer is
still judged against the user's own words, except that a phrase the law never uses counts as its
law's words when the answer looks for the clause stating an asked value (core/extractive.py).

A glossary may also name what users ask about that the law never mentions (`[silent]`: consent under
LL144, an "AI officer" under the EU AI Act). Such a question gets the plain "the loaded regulations
don't address this" with the nearest provisions, instead of a quote of the nearest rule, which would
read as an answer (core/extractive.py). A topic whose phrasing a provision retrieved for the question
uses is not declined: the law's silence is checked against its text, not taken on the file's word.
"""
from __future__ import annotations

import re
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property, lru_cache
from pathlib import Path

from core.errors import GlossaryError


@dataclass(frozen=True)
class GlossaryEntry:
    law: str  # the law's words, added to what is searched
    phrasings: tuple[str, ...]  # what users say for it

    @property
    def phrase(self) -> re.Pattern[str]:
        return _phrase_pattern(self.phrasings)


@dataclass(frozen=True)
class Silence:
    topic: str  # what the law does not mention, as the reply names it ("candidates' consent")
    phrasings: tuple[str, ...]  # how users ask about it

    @property
    def phrase(self) -> re.Pattern[str]:
        return _phrase_pattern(self.phrasings)


# A phrasing the collection's text uses this often is the law's own word for it.
PHRASE_USED_BY_THE_TEXT = 3


# Words a user puts between the words of a phrasing without changing what it names ("train people"
# -> "training the people", "tell staff" -> "tell our staff").
_DETERMINERS = r"(?:the|our|a|an|their|its|my|your|his|her|this|that|these|those)"
_BETWEEN_WORDS = r"(?:[\s-]?|\s+" + _DETERMINERS + r"\s+)"


@lru_cache(maxsize=4096)
def _phrase_pattern(phrasings: tuple[str, ...]) -> re.Pattern[str]:
    """Whole words, any case; the words of a phrasing apart by a space or a hyphen or written
    together ("chat bot" finds "chat-bot" and "chatbot") or with a determiner between them ("train
    people" finds "train the people"); each word also with an ending of its verb or plural forms
    ("train" finds "training", "trains", "trained")."""
    alternatives = []
    for phrasing in sorted(phrasings, key=len, reverse=True):
        words = [_inflected(w) for w in re.split(r"[\s-]+", phrasing.strip()) if w]
        if not words:
            continue
        alternatives.append(_BETWEEN_WORDS.join(words))
    return re.compile(r"(?<![\w-])(?:" + "|".join(alternatives) + r")(?![\w-])", re.IGNORECASE)


def _inflected(word: str) -> str:
    """`word` as a pattern that also finds its usual -s / -es / -ed / -ing forms; an abbreviation or a
    two-letter word ("EU", "AI", "on") only with a plural ending, one that is not all letters ("didn't",
    "if/else") only as written."""
    escaped = re.escape(word)
    if not word.isalpha():
        return escaped
    if len(word) < 3 or word.isupper():
        return escaped + r"(?:e?s)?"
    if word.endswith("e"):
        return re.escape(word[:-1]) + r"(?:e|es|ed|ing)"
    return escaped + r"(?:s|es|ed|ing)?"


@dataclass(frozen=True)
class Glossary:
    entries: tuple[GlossaryEntry, ...] = ()
    silences: tuple[Silence, ...] = ()

    @classmethod
    def of(cls, terms: dict[str, list[str]], silent: dict[str, list[str]] | None = None) -> "Glossary":
        return cls(
            tuple(GlossaryEntry(law, phrasings) for law, phrasings in _phrasings_of(terms)),
            tuple(Silence(topic, phrasings) for topic, phrasings in _phrasings_of(silent or {})),
        )

    def unused_in(self, text: str) -> "Glossary":
        """Without the phrasings `text` (a collection's own text) keeps using: those are searched
        as they are, and an expansion would only add the law's frequent words to them ("fine" in
        the EU AI Act, "audit" in LL144's rules). A phrasing the text uses once or twice in passing
        ("an online chatbot" in a recital about search engines) still needs the law's words. The
        silences are kept as they are: each question's retrieved provisions check them."""
        lowered = _lowered(text)
        entries = []
        for entry in self.entries:
            kept = tuple(p for p in entry.phrasings if _uses(lowered, p, PHRASE_USED_BY_THE_TEXT) < PHRASE_USED_BY_THE_TEXT)
            if kept:
                entries.append(GlossaryEntry(entry.law, kept))
        return Glossary(tuple(entries), self.silences)

    @classmethod
    def read(cls, path: Path) -> "Glossary":
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            raise GlossaryError(f"cannot read the glossary {path}: {exc}") from exc
        terms, silent = data.get("terms", {}), data.get("silent", {})
        if not isinstance(terms, dict):
            raise GlossaryError(f"{path}: [terms] must map the law's words to lists of phrasings")
        if not isinstance(silent, dict):
            raise GlossaryError(f"{path}: [silent] must map what the law does not mention to lists of phrasings")
        try:
            return cls.of(terms, silent)
        except GlossaryError as exc:
            raise GlossaryError(f"{path}: {exc}") from None

    @cached_property
    def words(self) -> frozenset[str]:
        """The lower-case words of every phrasing (derived once: it is read for every answer)."""
        return frozenset(w for e in self.entries for p in e.phrasings for w in re.findall(r"[\w'’]+", p.lower()))

    def __bool__(self) -> bool:
        return bool(self.entries or self.silences)

    def __add__(self, other: "Glossary") -> "Glossary":
        """Both glossaries' entries; the same law's words (or topic) gather both lists of phrasings."""
        terms = _merged((e.law, e.phrasings) for e in (*self.entries, *other.entries))
        silent = _merged((s.topic, s.phrasings) for s in (*self.silences, *other.silences))
        return Glossary(
            tuple(GlossaryEntry(law, phrasings) for law, phrasings in terms.items()),
            tuple(Silence(topic, phrasings) for topic, phrasings in silent.items()),
        )

    def silent_on(self, asking: str, retrieved: str = "") -> list[str]:
        """The topics the law does not mention that `asking` (the part of a question that asks)
        asks about, in the file's order. A topic any of whose phrasings `retrieved` (the provisions
        found for the question) uses is not one they are silent on."""
        return [s.topic for s in self.silences if s.phrase.search(asking) and not s.phrase.search(retrieved)]

    def silence_phrasings_used_in(self, text: str) -> dict[str, list[str]]:
        """{topic: its phrasings `text` (a collection's text) uses}: a glossary's author checks them
        (such a phrasing still declines a question whose retrieved provisions do not use it)."""
        lowered = _lowered(text)
        used = {s.topic: [p for p in s.phrasings if _uses(lowered, p, 1)] for s in self.silences}
        return {topic: phrasings for topic, phrasings in used.items() if phrasings}

    def expand(self, text: str) -> tuple[str, tuple[tuple[str, str], ...]]:
        """`text` with the law's words after the first use of each user phrase, and the
        (phrase as typed, law's words) pairs; a phrase whose law's words the text already has is
        left alone."""
        lowered = text.lower()
        inserts: list[tuple[int, str, str]] = []
        for entry in self.entries:
            if entry.law.lower() in lowered:
                continue
            m = entry.phrase.search(text)
            if m is not None:
                inserts.append((m.end(), m.group(0), entry.law))
        if not inserts:
            return text, ()
        out, pos = [], 0
        for end, _, law in sorted(inserts):
            out += [text[pos:end], f" ({law})"]
            pos = end
        out.append(text[pos:])
        return "".join(out), tuple((typed, law) for _, typed, law in sorted(inserts))


def _lowered(text: str) -> str:
    return re.sub(r"\s+", " ", text.lower())


def _uses(lowered: str, phrasing: str, at_most: int) -> int:
    """How often `lowered` (a text through `_lowered`) uses `phrasing`, counted up to `at_most`.
    The pattern is tried only where the phrasing's first word occurs: a scan of the whole text with
    it takes ten times as long."""
    pattern, first = _phrase_pattern((phrasing,)), phrasing.strip().lower().split()[0].split("-")[0]
    count, at = 0, lowered.find(first)
    while at >= 0 and count < at_most:
        count += pattern.match(lowered, at) is not None
        at = lowered.find(first, at + 1)
    return count


def _phrasings_of(table: dict[str, list[str]]) -> list[tuple[str, tuple[str, ...]]]:
    """(key, its phrasings) for each key with a phrasing; a lone string is a list of one."""
    found = []
    for key, phrasings in table.items():
        if isinstance(phrasings, str):
            phrasings = [phrasings]
        if not isinstance(phrasings, list) or not all(isinstance(p, str) for p in phrasings):
            raise GlossaryError(f"glossary entry {key!r}: expected a list of phrasings")
        phrasings = [p for p in phrasings if p.strip()]
        if key.strip() and phrasings:
            found.append((key.strip(), tuple(phrasings)))
    return found


def _merged(pairs: Iterable[tuple[str, tuple[str, ...]]]) -> dict[str, tuple[str, ...]]:
    merged: dict[str, tuple[str, ...]] = {}
    for key, phrasings in pairs:
        merged[key] = tuple(dict.fromkeys(merged.get(key, ()) + phrasings))
    return merged
