"""Entity names: one key per thing, whatever its case, number, quotes or abbreviation.

`entity_key("Automated Employment Decision Tools")` == `entity_key("automated employment decision
tool")`; abbreviations come from the text itself: `find_abbreviations` reads the "long form
(“ABBR”)" and "“Long form” or “ABBR” means" patterns legal text uses, and accepts a pair only when
the abbreviation's letters are the initials of the long form's words (so "(“Department”)" after a
long name is accepted only when the text says "or" inside the same parentheses, as definitions do).
"""
from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field

# Curly and typographic quotes -> straight ones, so one pattern matches every source.
_QUOTES = str.maketrans({"“": '"', "”": '"', "„": '"', "‟": '"', "‘": "'", "’": "'", "‚": "'", "`": "'"})
_NON_NAME = re.compile(r"[^\w\s/&-]+")
_SPACES = re.compile(r"\s+")
# Endings that look plural but are not ("bias", "analytics", "process", "status", "analysis").
_NOT_PLURAL = ("ss", "us", "is", "as", "ics")
_INVARIANT = frozenset({"data", "series", "species", "news", "means", "whereas"})
# Small words skipped when matching an abbreviation's letters to initials ("Department of Consumer
# and Worker Protection" -> DCWP).
MINOR_WORDS = frozenset({"of", "and", "the", "for", "on", "in", "to", "a", "an", "or", "&"})


def normalize_quotes(text: str) -> str:
    return unicodedata.normalize("NFKC", text).translate(_QUOTES)


def collapse(text: str) -> str:
    return _SPACES.sub(" ", text).strip()


def singular(word: str) -> str:
    """English singular of one lower-case word, by suffix rules (good enough for legal nouns)."""
    if len(word) <= 3 or word in _INVARIANT or not word.isalpha():
        return word
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith(("sses", "ches", "shes", "xes")):
        return word[:-2]
    if word.endswith(_NOT_PLURAL):
        return word
    if word.endswith("s"):
        return word[:-1]
    return word


def entity_key(name: str) -> str:
    """The key an entity is stored under: case-folded, quotes and punctuation dropped, singular words."""
    text = normalize_quotes(name).casefold()
    text = _NON_NAME.sub(" ", text)
    return " ".join(singular(w) for w in text.split())


def display_name(name: str) -> str:
    """A readable form of a name as written (quotes and surrounding punctuation removed)."""
    text = collapse(normalize_quotes(name)).strip(" \"'.,;:")
    return text


def initials_match(abbr: str, words: list[str]) -> bool:
    """True when the letters of `abbr` are the initials of `words` (minor words may be skipped)."""
    letters = [c for c in abbr.lower() if c.isalnum()]
    return _match(letters, [w.lower() for w in words if w])


def _match(letters: list[str], words: list[str]) -> bool:
    if not letters:
        return all(w in MINOR_WORDS for w in words)
    if not words:
        return False
    head, rest = words[0], words[1:]
    if head[0] == letters[0] and _match(letters[1:], rest):
        return True
    # Hyphenated/slashed words may give two letters ("decision-making" -> D, M).
    parts = re.split(r"[-/]", head)
    split_ok = 1 < len(parts) <= len(letters) and [p[:1] for p in parts] == letters[: len(parts)]
    if split_ok and _match(letters[len(parts) :], rest):
        return True
    return head in MINOR_WORDS and _match(letters, rest)


# The parenthesis first (cheap to find); the long form is then read from the words before it.
_PAREN_ABBR = re.compile(
    r"\(\s*\"(?P<abbr>[A-Z][A-Za-z0-9.&-]{1,11})\"(?:\s+or\s+\"(?P<other>[^\"]{2,40})\")?\s*\)"
)
_DEFINED_ALIAS = re.compile(r"\"(?P<long>[^\"]{3,100})\"\s+or\s+\"(?P<abbr>[^\"]{1,40})\"\s+means\b")


@dataclass
class Aliases:
    """alias key -> canonical key (the long form), learned from the corpus."""

    to_canonical: dict[str, str] = field(default_factory=dict)
    names: dict[str, str] = field(default_factory=dict)  # canonical key -> display name of the long form

    def add(self, alias: str, long_form: str) -> None:
        a, c = entity_key(alias), entity_key(long_form)
        if not a or not c or a == c:
            return
        # A long form is never an alias of something else; keep the first meaning of an alias.
        self.to_canonical.setdefault(a, c)
        self.names.setdefault(c, display_name(long_form))

    def canonical(self, key: str) -> str:
        return self.to_canonical.get(key, key)


def find_abbreviations(text: str, aliases: Aliases | None = None) -> Aliases:
    """Abbreviations the text defines for itself, added to `aliases` (a new one if None)."""
    aliases = aliases if aliases is not None else Aliases()
    text = collapse(normalize_quotes(text))
    for m in _PAREN_ABBR.finditer(text):
        words = re.split(r"[\s]+", text[max(0, m.start() - 160) : m.start()].strip())
        words = words[-(len(m.group("abbr")) * 2 + 2) :]
        abbr = m.group("abbr")
        long_form = _initials_suffix(abbr, words)
        if long_form is None:
            continue
        aliases.add(abbr, long_form)
        if m.group("other"):  # (“DCWP” or “Department”): the text says both name the same thing
            aliases.add(m.group("other"), long_form)
    for m in _DEFINED_ALIAS.finditer(text):
        # “Automated employment decision tool” or “AEDT” means ...: an explicit alias either way.
        aliases.add(m.group("abbr"), m.group("long"))
    return aliases


def _initials_suffix(abbr: str, words: list[str]) -> str | None:
    """The shortest run of trailing `words` whose initials spell `abbr`, or None."""
    letters = sum(1 for c in abbr if c.isalnum())
    for n in range(1, min(len(words), letters * 2 + 2) + 1):
        tail = [w.strip("\"'(),") for w in words[-n:]]
        if tail[0].lower() in MINOR_WORDS:
            continue
        if initials_match(abbr, tail):
            return " ".join(tail)
    return None
