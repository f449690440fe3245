"""Deterministic triplet extraction from legal text: what the text states explicitly, with provenance.

Two passes over a collection's chunks:
1. vocabulary: abbreviations the text defines ("automated employment decision tools (“AEDT”)") and
   defined terms with their definitions ("X means Y", "the term “X” means Y");
2. per chunk: definitions and exclusions, obligations / prohibitions / permissions (shall, must,
   may not, may, it shall be unlawful for ... to, is liable for), their conditions (unless, if,
   where, notwithstanding), deadlines ("no less than ten business days before such use"),
   penalties and amounts, cross-references ("as defined by § 20-870", "pursuant to section 5-301"),
   the document hierarchy (subsection -> section -> document) and which defined terms each
   provision (or definition) uses.

Every triplet carries the chunk id and citation label it came from. Nothing here calls a model.
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import pairwise

from core.kg import model as m
from core.kg.model import Definition, Entity, KGData, Triplet
from core.kg.normalize import (
    Aliases,
    collapse,
    display_name,
    entity_key,
    find_abbreviations,
    normalize_quotes,
)
from core.kg.provisions import find_references, label_provisions, lineage
from core.text import sentence_spans
from core.types import Chunk

MAX_OBJECT_CHARS = 600  # the stored object of one fact (the retriever shortens what it shows)

# "The term “X” means", "“X” means", "“X” or “Y” means", "‘X’ means" (EU style), "X shall mean".
_DEFINITION = re.compile(
    r"(?:(?<=^)|(?<=[\s.:;(]))(?:[Tt]he (?:term|phrase) )?(?P<q>[\"'])(?P<term>[^\"'\n]{2,100}?)(?P=q)"
    r"(?:\s+or\s+(?P<q2>[\"'])(?P<alias>[^\"'\n]{1,60}?)(?P=q2))?\s*,?\s+(?:means|shall mean)\b:?\s*"
)
_EXCLUSION = re.compile(
    r"[Tt]he term (?P<q>[\"'])(?P<term>[^\"']{2,100}?)(?P=q) does not include (?P<rest>[^.]+)\."
)
_HISTORY_NOTE = re.compile(r"\(L\.L\. \d{4}/\d+[^)]*\)")
_MODAL = re.compile(
    r"\b(?P<modal>shall not|must not|may not|cannot|shall|must|is required to|are required to|"
    r"is liable for|are liable for|may)\b"
)
_UNLAWFUL = re.compile(r"\bit shall be unlawful for (?P<subj>.+?) to (?P<obj>.+)$", re.IGNORECASE)
_CONDITION = re.compile(
    r"\b(?P<cond>unless|only if|if|where|provided that|so long as|notwithstanding|only in the following circumstances)\b"
    r"\s*(?P<rest>[^;:.]{4,240})",
    re.IGNORECASE,
)
_NUMBER = r"(?:\d+|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|fifteen|twenty|thirty|sixty|ninety)"
_DEADLINE = re.compile(
    rf"\b(?:no (?:less|more|later) than|not (?:less|more|later) than|at least|within|more than|less than|up to)\s+"
    rf"{_NUMBER}\s+(?:business |calendar )?(?:days?|weeks?|months?|years?)\b"
    r"(?:\s+(?:before|after|prior to|of|since|from|following)\s+[^.;,]{1,90})?",
    re.IGNORECASE,
)
_AMOUNT = re.compile(r"(?:€|\$|EUR\s?|USD\s?)\s?\d[\d,.]*(?:\s?(?:million|billion))?")
_PENALTY_WORDS = re.compile(r"\b(?:penalt(?:y|ies)|fines?|liable)\b", re.IGNORECASE)
_LEADING_MARKER = re.compile(r"^(?:\(?[a-z0-9]{1,4}[.)]\s+|\([a-z0-9]{1,4}\)\s*|[ivx]{1,4}\.\s+)+", re.IGNORECASE)
_LIST_ITEM = re.compile(r"^(?:\(?\d{1,2}[.)]|\([a-z]{1,4}\)|[ivx]{1,4}\.)\s", re.IGNORECASE)
_DETERMINERS = frozenset([
    "a", "an", "the", "any", "each", "such", "every", "all", "no", "its", "their", "his", "her", "this", "that", "these",
    "those",
])
# A subject noun phrase ends where a relative clause, participle or preposition starts.
_SUBJECT_BREAK = re.compile(
    r"\s(?:that|who|whom|which|whose|where|when|in|on|at|for|with|under|from|by|to|of|pursuant|"
    r"used|conducted|required|authorized|established|designated|collected|described|being|"
    r"considered|provided|referred)\b",
    re.IGNORECASE,
)
_MODAL_PREDICATE = {
    "shall": m.MUST,
    "must": m.MUST,
    "is required to": m.MUST,
    "are required to": m.MUST,
    "shall not": m.MUST_NOT,
    "must not": m.MUST_NOT,
    "may not": m.MUST_NOT,
    "cannot": m.MUST_NOT,
    "may": m.MAY,
    "is liable for": m.LIABLE,
    "are liable for": m.LIABLE,
}
_MAX_SUBJECT_WORDS = 5


@dataclass
class _Vocabulary:
    aliases: Aliases
    terms: dict[str, Entity]  # defined terms by key
    matcher: dict[str, str] = field(default_factory=dict)  # key or alias key -> canonical key
    by_first_word: dict[str, list[int]] = field(default_factory=dict)  # first word -> name lengths, longest first

    def canonical(self, name: str) -> str:
        return self.aliases.canonical(entity_key(name))

    def build_matcher(self) -> None:
        self.matcher = {k: k for k in self.terms}
        for alias, canonical in self.aliases.to_canonical.items():
            if canonical in self.terms:
                self.matcher[alias] = canonical
        lengths: dict[str, set[int]] = {}
        for k in self.matcher:
            words = k.split()
            lengths.setdefault(words[0], set()).add(len(words))
        self.by_first_word = {w: sorted(ns, reverse=True) for w, ns in lengths.items()}

    def terms_in(self, text: str) -> list[str]:
        """Defined terms (canonical keys) mentioned in `text`, longest match first, in order."""
        words = entity_key(text).split()
        found: list[str] = []
        i = 0
        while i < len(words):
            for n in self.by_first_word.get(words[i], ()):
                key = self.matcher.get(" ".join(words[i : i + n])) if i + n <= len(words) else None
                if key is not None:
                    if key not in found:
                        found.append(key)
                    i += n
                    break
            else:
                i += 1
        return found


@dataclass
class _DefinitionSpan:
    term: str  # as written
    alias: str | None
    start: int  # of the whole definition (the quoted term)
    body_start: int
    end: int


class OfflineExtractor:
    """`extract(collection, chunks, source_version)` -> KGData. Pure and deterministic."""

    name = "offline"

    def extract(self, collection: str, chunks: Sequence[Chunk], source_version: dict[str, str]) -> KGData:
        texts = {c.id: _clean(c.text) for c in chunks}
        vocab = self._vocabulary(chunks, texts)
        builder = _Builder(vocab)
        for chunk in chunks:
            builder.chunk(chunk, texts[chunk.id])
        return KGData(
            collection=collection,
            extractor=self.name,
            source_version=dict(source_version),
            entities=builder.entities,
            triplets=builder.unique_triplets(),
        )

    def _vocabulary(self, chunks: Sequence[Chunk], texts: dict[str, str]) -> _Vocabulary:
        aliases = Aliases()
        for chunk in chunks:
            find_abbreviations(texts[chunk.id], aliases)
        terms: dict[str, Entity] = {}
        for chunk in chunks:
            text = texts[chunk.id]
            for span in definition_spans(text):
                key = aliases.canonical(entity_key(span.term))
                if not key:
                    continue
                terms.setdefault(key, Entity(key=key, name=_term_name(span.term, aliases, key), kind="term"))
                if span.alias:
                    aliases.add(span.alias, span.term)
        # Aliases learned from definitions may merge two spellings: re-key once all are known.
        merged: dict[str, Entity] = {}
        for key, entity in terms.items():
            canonical = aliases.canonical(key)
            merged.setdefault(canonical, Entity(key=canonical, name=entity.name, kind="term"))
        vocab = _Vocabulary(aliases=aliases, terms=merged)
        for alias, canonical in aliases.to_canonical.items():
            if canonical in merged:
                display = _alias_display(alias, chunks, texts)
                if display and display not in merged[canonical].aliases:
                    merged[canonical].aliases.append(display)
        vocab.build_matcher()
        return vocab


def _term_name(written: str, aliases: Aliases, key: str) -> str:
    name = display_name(written)
    return name if entity_key(name) == key else aliases.names.get(key, name)


def _alias_display(alias_key: str, chunks: Sequence[Chunk], texts: dict[str, str]) -> str:
    """The alias as the text writes it (e.g. "AEDT", not "aedt")."""
    for chunk in chunks:
        m_ = re.search(rf"\b({re.escape(alias_key)})\b", texts[chunk.id], re.IGNORECASE)
        if m_:
            return m_.group(1)
    return alias_key


def _clean(text: str) -> str:
    return collapse(_HISTORY_NOTE.sub(" ", normalize_quotes(text)))


def definition_spans(text: str) -> list[_DefinitionSpan]:
    """Definitions in `text` (already quote-normalized and collapsed), each up to the next one."""
    found = [
        _DefinitionSpan(mt.group("term"), mt.group("alias"), mt.start(), mt.end(), len(text))
        for mt in _DEFINITION.finditer(text)
        if _looks_like_term(mt.group("term"))
    ]
    for i in range(len(found) - 1):
        found[i].end = found[i + 1].start
    return found


def _looks_like_term(term: str) -> bool:
    words = term.split()
    return 0 < len(words) <= 12 and any(ch.isalpha() for ch in term)


def definition_body(text: str, span: _DefinitionSpan, next_term: str | None) -> str:
    body = text[span.body_start : span.end].strip()
    if next_term:
        # The next definition's run-in heading ("Candidate for Employment.") ends this body.
        heading = re.compile(rf"\s*{re.escape(display_name(next_term))}\.?\s*$", re.IGNORECASE)
        body = heading.sub("", body)
    body = re.sub(r"\s*(?:[Tt]he term|[Tt]he phrase)\s*$", "", body)
    return body.strip()


class _Builder:
    def __init__(self, vocab: _Vocabulary) -> None:
        self.vocab = vocab
        self.entities: dict[str, Entity] = {k: Entity(e.key, e.name, e.kind, list(e.aliases)) for k, e in vocab.terms.items()}
        self.triplets: list[Triplet] = []

    # -- entities ------------------------------------------------------------------------------

    def entity(self, key: str, name: str, kind: m.EntityKind) -> str:
        existing = self.entities.get(key)
        if existing is None:
            self.entities[key] = Entity(key=key, name=name, kind=kind)
        elif existing.kind == "entity" and kind in ("term", "provision", "document"):
            existing.kind = kind
        return key

    def provision(self, key: str, name: str | None = None) -> str:
        for child, parent in pairwise(lineage(key)):
            self.entity(child, child, "provision")
            self.entity(parent, parent, "provision")
        return self.entity(key, name or key, "provision")

    def add(self, chunk: Chunk, subject: str, predicate: str, obj: str, *, entity: bool = False) -> None:
        if not subject or not obj or subject == obj:
            return
        if not entity and len(obj) > MAX_OBJECT_CHARS:
            obj = obj[:MAX_OBJECT_CHARS].rsplit(" ", 1)[0] + " …"
        self.triplets.append(Triplet(subject, predicate, obj, chunk.id, chunk.label, entity))

    def unique_triplets(self) -> list[Triplet]:
        seen: set[tuple] = set()
        out = []
        for t in self.triplets:
            key = (t.subject, t.predicate, t.object, t.chunk_id)
            if key not in seen:
                seen.add(key)
                out.append(t)
        return out

    # -- one chunk -----------------------------------------------------------------------------

    def chunk(self, chunk: Chunk, text: str) -> None:
        home = self._hierarchy(chunk)
        spans = definition_spans(text)
        covered: list[tuple[int, int]] = []
        for i, span in enumerate(spans):
            next_term = spans[i + 1].term if i + 1 < len(spans) else None
            self._definition(chunk, home, text, span, next_term)
            covered.append((span.start, span.end))
        for mt in _EXCLUSION.finditer(text):
            key = self.vocab.canonical(mt.group("term"))
            self.add(chunk, key, m.EXCLUDES, collapse(mt.group("rest")))
        rest = _outside(text, covered)
        for sentence in _sentences(rest):
            self._sentence(chunk, home, sentence)
        for ref in find_references(rest, home):
            self.provision(ref.key)
            self.add(chunk, home, ref.how, ref.key, entity=True)
        for term in self.vocab.terms_in(rest):
            self.add(chunk, home, m.USES_TERM, term, entity=True)

    def _hierarchy(self, chunk: Chunk) -> str:
        """Provision nodes of the chunk's label, part of their section, part of the document."""
        doc = self.entity(f"doc:{chunk.doc_id}", chunk.doc_title or chunk.doc_id, "document")
        keys = label_provisions(chunk.label)
        if not keys:
            home = self.entity(f"unit:{chunk.label}", chunk.label, "provision")
            self.add(chunk, home, m.PART_OF, doc, entity=True)
            return home
        prefix = chunk.label.split("§")[0].strip() if "§" in chunk.label else ""
        for key in keys:
            chain = lineage(key)
            for child, parent in pairwise(chain):
                self.provision(child, _named(prefix, child))
                self.provision(parent, _named(prefix, parent))
                self.add(chunk, child, m.PART_OF, parent, entity=True)
            self.provision(chain[-1], _named(prefix, chain[-1]))
            self.add(chunk, chain[-1], m.PART_OF, doc, entity=True)
        if chunk.heading:
            # "Bias Audit." -> the section's title, so a question naming the heading finds it.
            title = chunk.heading.split(" — ")[0].strip(" .")
            if title and title.lower() != "definitions":
                self.add(chunk, lineage(keys[0])[-1], m.TITLED, title)
        return keys[0]

    def _definition(self, chunk: Chunk, home: str, text: str, span: _DefinitionSpan, next_term: str | None) -> None:
        key = self.vocab.canonical(span.term)
        if key not in self.entities:
            self.entities[key] = Entity(key=key, name=display_name(span.term), kind="term")
        entity = self.entities[key]
        entity.kind = "term"
        body = definition_body(text, span, next_term)
        if not body:
            return
        if not any(d.chunk_id == chunk.id for d in entity.definitions):
            entity.definitions.append(Definition(body, chunk.label, chunk.id))
        first = _first_sentence(body)
        self.add(chunk, key, m.MEANS, first)
        self.add(chunk, key, m.DEFINED_IN, home, entity=True)
        if span.alias:
            self.add(chunk, key, m.ALIAS_OF, display_name(span.alias))
        for ref in find_references(body, home):
            self.provision(ref.key)
            self.add(chunk, key, m.DEFINED_BY if ref.how == "defined by" else ref.how, ref.key, entity=True)
            self.add(chunk, home, ref.how, ref.key, entity=True)
        for other in self.vocab.terms_in(body):
            if other != key:
                self.add(chunk, key, m.USES_TERM, other, entity=True)
        for sentence in _sentences(body)[1:]:
            self._sentence(chunk, home, sentence, default_subject=key)

    # -- sentences -----------------------------------------------------------------------------

    def _sentence(self, chunk: Chunk, home: str, sentence: str, default_subject: str | None = None) -> None:
        subjects, predicate, obj = self._obligation(sentence)
        if not subjects and default_subject and predicate:
            subjects = [default_subject]
        anchor = subjects[0] if subjects else (default_subject or home)
        if predicate and obj:
            if predicate == m.LIABLE and (_AMOUNT.search(obj) or _PENALTY_WORDS.search(obj)):
                predicate = m.PENALTY
            for subject in subjects or [home]:
                self.add(chunk, subject, predicate, obj)
            for cond in _CONDITION.finditer(sentence):
                rest = cond.group("rest")
                if not _strip_marker(sentence[: cond.start()]).strip():
                    rest = rest.split(",")[0]  # a leading "Where ..., X must": the clause ends at the comma
                self.add(chunk, anchor, m.CONDITION, collapse(f"{cond.group('cond')} {rest}"))
        for deadline in _DEADLINE.finditer(sentence):
            self.add(chunk, anchor, m.DEADLINE, collapse(deadline.group(0)))
        if _AMOUNT.search(sentence) and predicate != m.PENALTY:
            kind = m.PENALTY if _PENALTY_WORDS.search(sentence) else m.AMOUNT
            self.add(chunk, anchor, kind, _strip_marker(sentence))

    def _obligation(self, sentence: str) -> tuple[list[str], str | None, str]:
        unlawful = _UNLAWFUL.search(sentence)
        if unlawful:
            return self._subjects(unlawful.group("subj")), m.MUST_NOT, _tidy(unlawful.group("obj"))
        for mt in _MODAL.finditer(sentence):
            before = sentence[: mt.start()]
            subjects = self._subjects(before.rsplit(",", 1)[-1] if "," in before else before)
            if not subjects:
                continue
            obj = _tidy(sentence[mt.end() :])
            if len(obj.split()) < 2:
                continue
            return subjects, _MODAL_PREDICATE[mt.group("modal")], obj
        return [], None, ""

    def _subjects(self, phrase: str) -> list[str]:
        """Entity keys for the noun phrase before a modal ("any employer or employment agency that
        uses ..." -> employer, employment agency); [] when it is not a plain noun phrase."""
        phrase = _strip_marker(phrase.strip())
        phrase = re.split(r"[:;]|\.\s", phrase)[-1].strip()
        phrase = _strip_marker(phrase)
        head = _SUBJECT_BREAK.split(" " + phrase, maxsplit=1)[0].strip()
        if not self.vocab.terms_in(head) and re.search(r"\bthat\s", phrase):
            # "These rules establish that a bias audit of an AEDT must": the clause's own subject.
            inner = _SUBJECT_BREAK.split(" " + re.split(r"\bthat\s", phrase)[-1], maxsplit=1)[0].strip()
            if self.vocab.terms_in(inner):
                head = inner
        words = [w for w in head.split() if w.lower() not in _DETERMINERS]
        if not words:
            return []
        head = " ".join(words)
        terms = self.vocab.terms_in(head)
        parts = [p.strip() for p in re.split(r"\s*(?:,|\bor\b|\band\b|\band/or\b)\s*", head) if p.strip()]
        out: list[str] = []
        for part in parts:
            key = self.vocab.canonical(part)
            if key in self.entities or key in self.vocab.terms:
                out.append(key)
            elif (
                len(part.split()) <= _MAX_SUBJECT_WORDS
                and part[0].isalpha()
                and not _VERBISH.search(part)
                and not re.search(r"\w+ing\b", part)  # "Clarifying ...", "employers using ...": not a noun phrase
            ):
                out.append(self.entity(key, display_name(part), "entity"))
        if not out and terms:
            out = terms[:1]
        return [k for k in dict.fromkeys(out) if k]


_VERBISH = re.compile(r"\b(?:is|are|was|were|be|been|has|have|had|do|does|did|not)\b", re.IGNORECASE)


def _named(prefix: str, key: str) -> str:
    return f"{prefix} {key}".strip() if prefix and key.startswith("§") else key


def _sentences(text: str) -> list[str]:
    """Sentences with their list items: a lead-in ending in ':' keeps the items that follow it."""
    # Lower-case enumerators ("c. Failure to ...") and bullets also start a new unit.
    pieces = re.split(r"(?<=[.;:])\s+(?=[a-z]\.\s+[A-Z])|\s*•\s*", text)
    spans = [p[a:b].strip() for p in pieces if p.strip() for a, b in sentence_spans(p, min_chars=4)]
    out: list[str] = []
    for s in spans:
        if (
            out
            and out[-1].rstrip().endswith((":", ";", "; and", "; or", ", and", "; and,", "; or,"))
            and _LIST_ITEM.match(s)
            or out
            and _LIST_ITEM.match(s)
            and re.search(r":\s", out[-1])
            and len(out[-1]) < 1500
        ):
            out[-1] = f"{out[-1]} {s}"
        else:
            out.append(s)
    return out


def _outside(text: str, spans: Iterable[tuple[int, int]]) -> str:
    spans = sorted(spans)
    if not spans:
        return text
    parts, pos = [], 0
    for a, b in spans:
        parts.append(text[pos:a])
        pos = max(pos, b)
    parts.append(text[pos:])
    return collapse(" ".join(parts))


def _first_sentence(body: str) -> str:
    sentences = _sentences(body)
    return _tidy(sentences[0]) if sentences else _tidy(body)


def _strip_marker(text: str) -> str:
    return _LEADING_MARKER.sub("", text.strip()).strip()


def _tidy(text: str) -> str:
    return collapse(text).strip(" ,;:").rstrip(".")
