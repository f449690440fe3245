"""A collection's glossary: the words users say for what the law calls otherwise.

Users ask about "chatbots", "kill switches" and "careers pages"; the EU AI Act speaks of "AI systems
intended to interact directly with natural persons", a "stop button … in a safe state", and LL144's
rules of "the employment section of its website". Neither the embedding model nor BM25 can know
that, and the collection's text does not say it (core/lexicon.py repairs what the text does say:
spelling, abbreviations, compounds). A glossary is a short file a compliance team keeps per
collection, `"the law's words" = ["what users say", ...]`; a question that uses a user's phrase is
searched with the law's words added after it, "chatbot (AI systems intended to interact directly
with natural persons)", like an abbreviation's long form. Only what is searched changes: the answer
is still judged against the user's own words.
"""
from __future__ import annotations

import re
import tomllib
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


# A phrasing the collection's text uses this often is the law's own word for it.
PHRASE_USED_BY_THE_TEXT = 3


@lru_cache(maxsize=4096)
def _phrase_pattern(phrasings: tuple[str, ...]) -> re.Pattern[str]:
    """Whole words, any case; the words of a phrasing apart by a space or a hyphen or written
    together ("chat bot" finds "chat-bot" and "chatbot"), the last one also with a plural ending."""
    alternatives = []
    for phrasing in sorted(phrasings, key=len, reverse=True):
        words = [re.escape(w) for w in re.split(r"[\s-]+", phrasing.strip()) if w]
        if not words:
            continue
        alternatives.append(r"[\s-]?".join(words) + (r"(?:e?s)?" if words[-1][-1:].isalpha() else ""))
    return re.compile(r"(?<![\w-])(?:" + "|".join(alternatives) + r")(?![\w-])", re.IGNORECASE)


@dataclass(frozen=True)
class Glossary:
    entries: tuple[GlossaryEntry, ...] = ()

    @classmethod
    def of(cls, terms: dict[str, list[str]]) -> "Glossary":
        entries = []
        for law, phrasings in terms.items():
            if isinstance(phrasings, str):
                phrasings = [phrasings]
            if not isinstance(phrasings, list) or not all(isinstance(p, str) for p in phrasings):
                raise GlossaryError(f"glossary entry {law!r}: expected a list of phrasings")
            phrasings = [p for p in phrasings if p.strip()]
            if law.strip() and phrasings:
                entries.append(GlossaryEntry(law.strip(), tuple(phrasings)))
        return cls(tuple(entries))

    def unused_in(self, text: str) -> "Glossary":
        """Without the phrasings `text` (a collection's own text) keeps using: those are searched
        as they are, and an expansion would only add the law's frequent words to them ("fine" in
        the EU AI Act, "audit" in LL144's rules). A phrasing the text uses once or twice in passing
        ("an online chatbot" in a recital about search engines) still needs the law's words."""
        lowered = re.sub(r"\s+", " ", text.lower())

        def used(phrasing: str) -> bool:
            # The pattern is tried only where its first word occurs: a scan of the whole text with
            # it takes ten times as long.
            pattern, first = _phrase_pattern((phrasing,)), phrasing.strip().lower().split()[0].split("-")[0]
            count, at = 0, lowered.find(first)
            while at >= 0 and count < PHRASE_USED_BY_THE_TEXT:
                count += pattern.match(lowered, at) is not None
                at = lowered.find(first, at + 1)
            return count >= PHRASE_USED_BY_THE_TEXT

        entries = []
        for entry in self.entries:
            kept = tuple(p for p in entry.phrasings if not used(p))
            if kept:
                entries.append(GlossaryEntry(entry.law, kept))
        return Glossary(tuple(entries))

    @classmethod
    def read(cls, path: Path) -> "Glossary":
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            raise GlossaryError(f"cannot read the glossary {path}: {exc}") from exc
        terms = data.get("terms", {})
        if not isinstance(terms, dict):
            raise GlossaryError(f"{path}: [terms] must map the law's words to lists of phrasings")
        try:
            return cls.of(terms)
        except GlossaryError as exc:
            raise GlossaryError(f"{path}: {exc}") from None

    @cached_property
    def words(self) -> frozenset[str]:
        """The lower-case words of every phrasing (derived once: it is read for every answer)."""
        return frozenset(w for e in self.entries for p in e.phrasings for w in re.findall(r"[\w'’]+", p.lower()))

    def __bool__(self) -> bool:
        return bool(self.entries)

    def __add__(self, other: "Glossary") -> "Glossary":
        """Both glossaries' entries; the same law's words gather both lists of phrasings."""
        merged: dict[str, tuple[str, ...]] = {}
        for entry in (*self.entries, *other.entries):
            merged[entry.law] = tuple(dict.fromkeys(merged.get(entry.law, ()) + entry.phrasings))
        return Glossary(tuple(GlossaryEntry(law, phrasings) for law, phrasings in merged.items()))

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
