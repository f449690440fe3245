"""Links to the law: the address of the official text a citation points to.

A document's link rules are URL patterns whose placeholders are filled from the citation's label
(and the cited chunk's page), e.g. for the EU AI Act

    https://eur-lex.europa.eu/eli/reg/2024/1689/oj#art_{article}   "EU AI Act Art. 99(3)" -> #art_99

Placeholders: {article} (Art. 99(3) -> 99), {recital} (Recital 12 -> 12), {annex} (Annex III(1) ->
III), {section} (6 RCNY § 5-301(b) -> 5-301; Admin. Code § 20-871(a) -> 20-871) and {page} (the
page the cited text starts on, for `file.pdf#page={page}`). A rule may apply only to labels that
contain a text (`label_contains`, e.g. "Admin. Code" inside a document that also quotes rules).

The first rule that applies and whose placeholders the label fills gives the link. When none does,
the first applicable rule's address without its fragment is used if the placeholders were all in
the fragment (`https://x/handbook#sec-{section}` -> `https://x/handbook`), else there is no link.

Patterns come from the corpus manifest (bot/corpora.toml, per file) and from `hypa ingest
--source-url` (stored with the document's record in the index); CitationLinks puts the resolved
address on each Citation after the generator has answered, so both generators, both index backends
and every front end share one resolution and existing indexes need no re-ingest.
"""
from __future__ import annotations

import dataclasses
import logging
import re
import string
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlsplit

from core.errors import LinkPatternError
from core.types import Answer, Chunk, ScoredChunk, Turn

log = logging.getLogger(__name__)

PLACEHOLDERS = ("article", "recital", "annex", "section", "page")
MAX_PATTERN_CHARS = 1000  # a link shown under every answer; Telegram and Slack messages have limits

# What each placeholder reads from a label. Numbers stop before the subdivision: "Art. 99(3)" -> 99,
# "§ 5-301(b)" -> 5-301 (publishers anchor articles and sections, not their paragraphs).
_ARTICLE = re.compile(r"\bArt(?:icle)?\.?\s+(\d+[a-z]?)\b")
_RECITAL = re.compile(r"\bRecital\s+(\d+)\b")
_ANNEX = re.compile(r"\bAnnex\s+([IVXLC]+)\b")
_SECTION = re.compile(r"§\s*(\d[\w.\-]*?)(?=\(|,|\s|$)")


def check_pattern(pattern: str) -> str:
    """The pattern if it is an http(s) address whose placeholders are known (LinkPatternError otherwise)."""
    pattern = pattern.strip()
    if len(pattern) > MAX_PATTERN_CHARS:
        raise LinkPatternError(f"the source URL is {len(pattern)} characters long; at most {MAX_PATTERN_CHARS}")
    if any(ch.isspace() for ch in pattern):
        raise LinkPatternError(f"source URL {pattern!r} contains spaces; encode them as %20")
    try:
        fields = placeholders(pattern)
    except ValueError as exc:
        raise LinkPatternError(f"source URL {pattern!r}: {exc} (write a literal brace as {{{{ or }}}})") from None
    unknown = sorted(f for f in fields if f not in PLACEHOLDERS)
    if unknown:
        known = ", ".join("{" + p + "}" for p in PLACEHOLDERS)
        raise LinkPatternError(f"source URL {pattern!r}: unknown placeholder {{{unknown[0]}}}; use {known}")
    parts = urlsplit(_blank(pattern))
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise LinkPatternError(f"source URL {pattern!r} is not an http(s) address (e.g. https://example.com/policy.pdf)")
    return pattern


def placeholders(pattern: str) -> list[str]:
    """The placeholder names in a pattern (ValueError for unbalanced braces or a format spec)."""
    names = []
    for _, name, spec, conversion in string.Formatter().parse(pattern):
        if name is None:
            continue
        if spec or conversion or not name.isidentifier():
            raise ValueError(f"placeholder {{{name}{'!' + conversion if conversion else ''}{':' + spec if spec else ''}}} "
                             "is not a plain name")
        names.append(name)
    return names


def _blank(pattern: str) -> str:
    """The pattern with its placeholders filled by a neutral value (to check the address's shape)."""
    return pattern.format(**{name: "1" for name in placeholders(pattern)})


def label_values(label: str, page: int = 0) -> dict[str, str]:
    """What a citation label (and the cited page) fills in: only the placeholders it has a value for."""
    values: dict[str, str] = {}
    for name, pattern in (("article", _ARTICLE), ("recital", _RECITAL), ("annex", _ANNEX), ("section", _SECTION)):
        if m := pattern.search(label):
            values[name] = m.group(1).rstrip(".")
    if page > 0:
        values["page"] = str(page)
    return values


@dataclass(frozen=True)
class LinkRule:
    url: str  # a URL pattern (check_pattern)
    label_contains: str = ""  # "" = every label

    def applies(self, label: str) -> bool:
        return not self.label_contains or self.label_contains in label

    def expand(self, values: Mapping[str, str]) -> str | None:
        """The address with every placeholder filled, or None when the label lacks one of them."""
        names = placeholders(self.url)
        if any(name not in values for name in names):
            return None
        return self.url.format(**{name: quote(values[name], safe="") for name in names})

    def base(self) -> str:
        """The address without the fragment, when only the fragment has placeholders (else "")."""
        address = self.url.split("#", 1)[0]
        return "" if placeholders(address) else address


@dataclass(frozen=True)
class DocumentLinks:
    """Where one document's citations point: its rules, tried in order."""

    rules: tuple[LinkRule, ...]

    @classmethod
    def single(cls, pattern: str) -> DocumentLinks:
        """One pattern for every citation (`hypa ingest --source-url`)."""
        return cls((LinkRule(pattern),))

    def url_for(self, label: str, page: int = 0) -> str:
        values = label_values(label, page)
        applicable = [rule for rule in self.rules if rule.applies(label)]
        for rule in applicable:
            url = rule.expand(values)
            if url:
                return url
        return next((base for rule in applicable if (base := rule.base())), "")


# collection -> {doc_id: its links}; documents without links are absent.
LinksOfCollection = Callable[[str], Mapping[str, DocumentLinks]]


class CitationLinks:
    """Puts the address of the official text on every citation of an answer (Citation.url)."""

    def __init__(self, links_of: LinksOfCollection) -> None:
        self.links_of = links_of

    def link(self, answer: Answer, contexts: Sequence[ScoredChunk]) -> Answer:
        if not answer.citations:
            return answer
        chunks = {sc.chunk.id: sc.chunk for sc in contexts}
        per_collection: dict[str, Mapping[str, DocumentLinks]] = {}
        cited = []
        for citation in answer.citations:
            chunk = chunks.get(citation.chunk_id)
            url = self._url(chunk, citation.label, per_collection) if chunk is not None else ""
            cited.append(dataclasses.replace(citation, url=url) if url else citation)
        return dataclasses.replace(answer, citations=cited)

    def _url(self, chunk: Chunk, label: str, per_collection: dict[str, Mapping[str, DocumentLinks]]) -> str:
        if chunk.collection not in per_collection:
            try:
                per_collection[chunk.collection] = self.links_of(chunk.collection)
            except Exception:  # a link is an extra: the answer is shown without it, never lost for it
                log.exception("could not read the link patterns of collection %r; citations go without links",
                              chunk.collection)
                per_collection[chunk.collection] = {}
        links = per_collection[chunk.collection].get(chunk.doc_id)
        return links.url_for(label, chunk.page_start) if links is not None else ""


class LinkingGenerator:
    """A core.pipeline.Generator whose answers' citations carry links (CitationLinks): wraps another.

    Other attributes are the wrapped generator's (e.g. Claude's `client`), so callers that reach
    into it keep working."""

    def __init__(self, inner: Any, links: CitationLinks) -> None:
        self.inner = inner
        self.links = links

    def generate(
        self,
        question: str,
        contexts: Sequence[ScoredChunk],
        history: Sequence[Turn] = (),
        query_vector: Any = None,
        asked: str | None = None,
        asking_vectors: Any = None,
    ) -> Answer:
        answer = self.inner.generate(question, contexts, history, query_vector, asked=asked, asking_vectors=asking_vectors)
        return self.links.link(answer, contexts)

    def __getattr__(self, name: str) -> Any:
        if name == "inner":  # not set yet (e.g. while copying): no endless recursion
            raise AttributeError(name)
        return getattr(self.inner, name)
