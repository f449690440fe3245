"""Titles of the units a chunk cites, so that search can find it by what they are about.

"Chapters I and II shall apply from … [six months from the date of entry into force]" answers "when do
the rules on prohibited AI practices start to apply?", but shares no word with it: Chapter II's title
is "Prohibited AI practices". Art. 99(4) sets the fine for breaching "obligations … pursuant to
Article 50", the transparency duties a user calls "labelling AI content". Legal text names units by
number and the reader supplies the title. At ingest each chunk gets `references`: the titles of the
chapters, articles and sections its text cites, taken from the same document ("Chapter II: Prohibited AI
practices; Article 50: Transparency obligations for providers and deployers of certain AI systems").
They are indexed with the chunk (Chunk.search_view) and never quoted.
"""
from __future__ import annotations

import re
from dataclasses import replace
from typing import Sequence

from core.types import Chunk

MAX_REFERENCES = 10

# A chapter heading and its title on the next line(s), in capitals: "CHAPTER II\nPROHIBITED AI PRACTICES".
_CHAPTER_TITLE = re.compile(r"^CHAPTER\s+([IVXLC]+)\s*\n((?:[A-Z0-9][A-Z0-9 ,'’()\-–/]+\n){1,3})", re.M)
_ARTICLE_IN_LABEL = re.compile(r"\bArt\.\s*(\d+[a-z]?)\b")
_SECTION_IN_LABEL = re.compile(r"§\s*(\d+-\d+)")
_NUMERAL_LIST = r"{item}(?:\s*(?:,|and|or|to|–|-)\s*{item})*"
_CHAPTER_REF = re.compile(r"\bChapters?\s+(" + _NUMERAL_LIST.format(item=r"[IVXLC]+\b") + ")")
_ARTICLE_REF = re.compile(r"\bArticles?\s+(" + _NUMERAL_LIST.format(item=r"\d+[a-z]?\b") + ")")
_SECTION_REF = re.compile(r"(?:\bsections?\s+|§+\s*)(\d+-\d+)", re.I)
_ITEM = re.compile(r"\b(?:\d+-\d+|[IVXLC]+|\d+[a-z]?)\b")


def chapter_titles(text: str) -> dict[str, str]:
    """{"II": "Prohibited AI practices", ...} from a document's capitalised chapter headings."""
    titles: dict[str, str] = {}
    for m in _CHAPTER_TITLE.finditer(text):
        title = " ".join(m.group(2).split())
        titles.setdefault(m.group(1), title[:1] + title[1:].lower())
    return titles


def unit_titles(chunks: Sequence[Chunk]) -> tuple[dict[str, str], dict[str, str]]:
    """Article and section titles from the chunks' labels and headings: ({"50": "..."}, {"20-871": "..."})."""
    articles: dict[str, str] = {}
    sections: dict[str, str] = {}
    for chunk in chunks:
        heading = chunk.heading.split("—")[0].strip().rstrip(".`")
        if not heading:
            continue
        if m := _ARTICLE_IN_LABEL.search(chunk.label):
            articles.setdefault(m.group(1), heading)
        if m := _SECTION_IN_LABEL.search(chunk.label):
            sections.setdefault(m.group(1), heading)
    return articles, sections


def with_references(chunks: Sequence[Chunk], document_text: str) -> list[Chunk]:
    """The chunks, each with the titles of the units its text cites (not itself)."""
    chapters = chapter_titles(document_text)
    articles, sections = unit_titles(chunks)
    out = []
    for chunk in chunks:
        own_article = _ARTICLE_IN_LABEL.search(chunk.label)
        own_section = _SECTION_IN_LABEL.search(chunk.label)
        own = {own_article.group(1) if own_article else None, own_section.group(1) if own_section else None}
        found: list[str] = []
        for pattern, kind, titles in (
            (_CHAPTER_REF, "Chapter", chapters),
            (_ARTICLE_REF, "Article", articles),
            (_SECTION_REF, "§", sections),
        ):
            for m in pattern.finditer(chunk.text):
                for number in _ITEM.findall(m.group(1)):
                    title = titles.get(number)
                    entry = f"{kind} {number}: {title}"
                    if title and number not in own and entry not in found:
                        found.append(entry)
        out.append(replace(chunk, references="; ".join(found[:MAX_REFERENCES])) if found else chunk)
    return out


def _cited(text: str) -> list[tuple[str, str]]:
    """(kind, number) of every unit `text` cites, in order: ("Chapter", "II"), ("Article", "50"), ("§", "20-871")."""
    found: list[tuple[str, str]] = []
    for pattern, kind in ((_CHAPTER_REF, "Chapter"), (_ARTICLE_REF, "Article"), (_SECTION_REF, "§")):
        for m in pattern.finditer(text):
            found.extend((kind, number) for number in _ITEM.findall(m.group(1)))
    return found


def with_cited_titles(segment: str, references: str) -> str:
    """The segment followed by the titles of the units it cites, taken from its chunk's `references`
    ("(a) Chapters I and II shall apply from …" + "(Chapter I: General provisions; Chapter II:
    Prohibited ai practices)"); the segment itself when it cites none of them."""
    if not references:
        return segment
    titles = {}
    for entry in references.split("; "):
        name = entry.partition(": ")[0]
        kind, _, number = name.partition(" ")
        titles[(kind, number)] = entry
    cited = list(dict.fromkeys(titles[c] for c in _cited(segment) if c in titles))
    return f"{segment} ({'; '.join(cited)})" if cited else segment

