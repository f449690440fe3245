"""Split a loaded regulation into citable chunks along its own legal structure.

HyPA-RAG found pattern-based chunking along the document's units (sections, articles,
subsections) retrieves best. This module:

1. profiles the document from its text (EU act? NYC code or rules? a council bill? a notice?),
2. finds top-level units line by line: NYC `§ 20-871` / `§ 5-301` sections, `Article 26`,
   `ANNEX III` (and its `Section 1`), recitals `(12)` after "Whereas:", bill sections
   (`Section 1.`, `§ 2.`), notices and statements of basis and purpose, Markdown/HTML headings,
3. splits each unit into its subdivisions — `(a)`/`a.`, `(1)`/`1.`, `(i)`/`i.`, defined terms,
   worked examples — and plans one chunk per subdivision, descending a level only when a
   subdivision exceeds the token budget and gluing tiny neighbours together,
4. splits what is still too long with a sentence-aware token splitter (LangChain), with overlap.

Every chunk's text is `doc.text[char_start:char_end]`; labels are citation strings such as
"6 RCNY § 5-301(b)", "Admin. Code § 20-871(a)" or "EU AI Act Art. 26(1)".
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import Callable

from core.ingest.loaders import LoadedDocument
from core.ingest.references import with_references
from core.roles import chunk_role
from core.types import Chunk

TokenCounter = Callable[[str], int]

# Bumped whenever the chunks cut from an unchanged file change (labels, roles, references): ingest
# re-chunks a document whose stored version differs (core/ingestion.py).
CHUNKING_VERSION = 3

# Subdivisions smaller than this are glued to a neighbour: a 10-token "(e) the licence." says too
# little on its own to be retrieved, and floods the index with near-empty chunks.
MIN_CHUNK_TOKENS = 40
# Enumerations deeper than (a)(1)(i)(A) are not split further; the token splitter takes over.
_MAX_DEPTH = 4
# A line longer than this is body text, never a unit title.
_MAX_TITLE_WORDS = 14


def chunk_document(
    doc: LoadedDocument,
    *,
    collection: str,
    doc_id: str,
    chunk_tokens: int,
    chunk_overlap: int,
    count_tokens: TokenCounter,
    min_tokens: int = MIN_CHUNK_TOKENS,
) -> list[Chunk]:
    """Chunks of `doc`, in document order, each at most `chunk_tokens` tokens by `count_tokens`."""
    if chunk_tokens < 8:
        raise ValueError(f"chunk_tokens must be at least 8, got {chunk_tokens}")
    if not 0 <= chunk_overlap < chunk_tokens:
        raise ValueError(f"chunk_overlap ({chunk_overlap}) must be >= 0 and < chunk_tokens ({chunk_tokens})")
    ctx = _Context(doc.text, count_tokens, chunk_tokens, chunk_overlap, min(min_tokens, chunk_tokens // 2))
    profile = _profile(doc)
    units = _find_units(doc, profile, ctx)
    groups = [g for unit in units for g in _plan_unit(unit, ctx)]
    chunks = _make_chunks(doc, groups, ctx, collection=collection, doc_id=doc_id, title=profile.title)
    return with_references(chunks, doc.text)


# --- shared plumbing ---------------------------------------------------------------------------


@dataclass
class _Context:
    text: str
    count: TokenCounter
    budget: int
    overlap: int
    min_tokens: int
    _cache: dict[tuple[int, int], int] = field(default_factory=dict)

    def tokens(self, start: int, end: int) -> int:
        # Spans are measured repeatedly while planning (unit, then subdivision); count each once.
        key = (start, end)
        if key not in self._cache:
            self._cache[key] = self.count(self.text[start:end])
        return self._cache[key]


@dataclass(frozen=True)
class _Line:
    start: int
    end: int
    text: str  # == doc.text[start:end]


def _split_lines(text: str) -> list[_Line]:
    lines, pos = [], 0
    for raw in text.split("\n"):
        lines.append(_Line(pos, pos + len(raw), raw))
        pos += len(raw) + 1
    return lines


def _strip_span(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def _words(s: str) -> int:
    return len(s.split())


# --- document profile --------------------------------------------------------------------------

# Short titles of EU acts as they are usually cited.
_EU_SHORT_NAMES = {"Artificial Intelligence Act": "AI Act"}
_EU_ACT = re.compile(r"\b(?:REGULATION|DIRECTIVE|Regulation|Directive) \((?:EU|EC|EEC|Euratom)\)")
_EU_NUMBER = re.compile(r"\b(REGULATION|DIRECTIVE|Regulation|Directive) \((EU|EC)\) (?:No )?(\d{2,4}/\d+)")
_SHORT_TITLE = re.compile(r"\(([A-Z][A-Za-z]+(?: [A-Za-z]+){0,6} (?:Act|Regulation))\)")
_NYC = re.compile(r"City of New York|New York City|\bNYC\b", re.I)
_BILL = re.compile(r"\bInt\.?\s*No\.?\s*(\d+(?:-[A-Z])?)\b")
_ISSUER = re.compile(r"\bDepartment of [A-Z][A-Za-z ,&]+?\s*\(\s*[“\"]([A-Z]{2,8})[”\"]")
# Clauses that say which code an amendment goes into; the nearest one before a `§ T-N`
# section tells whether it is Administrative Code or Rules of the City of New York.
_CODE_CLAUSES = (
    (re.compile(r"\bTitle\s+(\d+)\s+of\s+the\s+Rules\s+of\s+the\s+City\s+of\s+New\s+York", re.I), "{} RCNY"),
    (
        re.compile(
            r"\badministrative\s+code\s+of\s+the\s+city\s+of\s+New\s+York|\bNew\s+York\s+City\s+Administrative\s+Code",
            re.I,
        ),
        "Admin. Code",
    ),
)
_AMENDS = re.compile(r"\bamend", re.I)
_LOCAL_LAW_NOTE = re.compile(r"\(L\.L\.\s*\d{4}/\d+")


@dataclass(frozen=True)
class _Profile:
    title: str
    prefix: str  # label prefix for articles, annexes, recitals: "EU AI Act", or the doc title
    eu: bool
    nyc: bool
    bill: str  # "Int. No. 1894-A" for a council bill, else ""
    issuer: str  # acronym of the agency issuing a notice ("DCWP"), else ""
    clauses: tuple[tuple[int, str], ...]  # (offset, code body) of amending clauses, ascending
    has_articles: bool


def _profile(doc: LoadedDocument) -> _Profile:
    text, head = doc.text, doc.text[:8000]
    eu = bool(_EU_ACT.search(head)) and bool(re.search(r"^Whereas|^Article 1\s*$", text, re.M))
    bill = _BILL.search(head)
    issuer = _ISSUER.search(text)
    return _Profile(
        title=doc.title,
        prefix=_eu_prefix(doc) if eu else doc.title,
        eu=eu,
        nyc=bool(_NYC.search(text)),
        bill=f"Int. No. {bill.group(1)}" if bill else "",
        issuer=issuer.group(1) if issuer else "",
        clauses=_code_clauses(text),
        has_articles=bool(re.search(r"^(?:#+\s*)?Article \d+[a-z]?\s*$", text, re.M)),
    )


def _eu_prefix(doc: LoadedDocument) -> str:
    head = " ".join(doc.text[:8000].split())
    short = doc.title if doc.title.endswith(("Act", "Regulation")) else ""
    if not short and (m := _SHORT_TITLE.search(head)):
        short = m.group(1)
    if short:
        return "EU " + _EU_SHORT_NAMES.get(short, short)
    if m := _EU_NUMBER.search(head):
        return f"{m.group(1).title()} ({m.group(2)}) {m.group(3)}"
    return doc.title


def _code_clauses(text: str) -> tuple[tuple[int, str], ...]:
    found = []
    for pattern, template in _CODE_CLAUSES:
        for m in pattern.finditer(text):
            window = text[max(0, m.start() - 150) : m.end() + 150]
            if _AMENDS.search(window):  # a cross-reference is not an amending clause
                found.append((m.start(), template.format(*m.groups())))
    return tuple(sorted(found))


def _code_body(profile: _Profile, offset: int, unit_text: str) -> str:
    """Which code a `§ T-N` section belongs to, from the text around it."""
    before = [body for pos, body in profile.clauses if pos < offset]
    if before:
        return before[-1]
    if _LOCAL_LAW_NOTE.search(unit_text) or profile.nyc:
        # Sections carrying a local-law history note, or any NYC section without an
        # amending clause in front of it, are codified Administrative Code.
        return "Admin. Code"
    return profile.title


# --- top-level units ----------------------------------------------------------------------------

_KIND_FRONT = "front"  # text before the first unit
_KIND_DIVIDER = "divider"  # CHAPTER / Subchapter / Section headings that only group units


@dataclass
class _Unit:
    start: int
    body_start: int  # where the unit's own text begins, after its heading
    label: str
    heading: str
    kind: str
    subdivide: bool = True  # look for (a)/(1)/defined terms inside
    citable: bool = True  # label takes "(a)" directly: "§ 5-301" + "(a)"
    end: int = -1


_MD_PREFIX = re.compile(r"^#{1,6}\s+")
_CODE_SECTION = re.compile(r"^§{1,2}\s*(\d+[A-Za-z]?-\d+[A-Za-z.\d]*?)\.?(?:\s+(.*))?$")
_PLAIN_SECTION = re.compile(
    r"^(?:§|Section|SECTION|Sec\.)\s*(\d+[A-Za-z]?)(?:\.\s*|\s*[:–—]\s*|\s+-\s+|\s+(?=[A-Z])|\s*$)(.*)$"
)
# "Article 26" alone (title on the next line) or "Article 4 - Scope"; never "Article 78." (a reference).
_ARTICLE = re.compile(r"^(?:Article|ARTICLE|Art\.)\s+(\d+[a-z]?)\s*(?:[.:–—-]\s*(\S.*))?$")
# In a Markdown/HTML heading the title may follow the number after a plain space.
_ARTICLE_HEADING = re.compile(r"^(?:Article|ARTICLE|Art\.)\s+(\d+[a-z]?)\b\s*[.:–—-]?\s*(\S.*)?$")
_ANNEX = re.compile(r"^(?:ANNEX|Annex|APPENDIX|Appendix)\s+([IVXLC]+|\d+|[A-Z])\s*(?:[.:–—-]\s*(\S.*))?$")
_ANNEX_SECTION = re.compile(r"^(?:Section|SECTION|Part|PART)\s+([A-Z]|\d+|[IVX]+)(?:\s*[.:–—-]\s*(\S.*)|\s*$)")
_BARE_SECTION = re.compile(r"^(?:Section|SECTION)\s+\d+[A-Za-z]?$")
_DIVIDER = re.compile(
    r"^(?:CHAPTER|Chapter|TITLE|Title|PART|Part|SUBCHAPTER|Subchapter|BOOK|Book|SUBPART|Subpart)"
    r"\s+([IVXLC]+|\d+[A-Z]?|[A-Z])\b\s*(?:[:.–—-]\s*([^.]{0,120}))?$"
)
_WHEREAS = re.compile(r"^Whereas\s*:?\s*$", re.I)
_ADOPTED = re.compile(r"^(?:HAVE|HAS) ADOPTED TH(?:IS|E FOLLOWING)")
_RECITAL = re.compile(r"^\((\d{1,3})\)\s+\S")
_NOTICE = re.compile(r"^Notice of (Adoption|Proposed Rule ?making|Public Hearing|Proposed)\b.{0,60}$", re.I)
_BASIS = re.compile(r"^Statement of Basis and Purpose\b.{0,40}$", re.I)


@dataclass
class _ScanState:
    """What the line scan has seen so far; one per document."""

    recital_next: int = 0  # expected next recital number; 0 = not in the recitals
    article: float = 0  # number of the last article heading (4a = 4.5)
    annex_number: float = 0
    annex: str = ""  # label of the annex being read, "" outside annexes
    notice: str = ""  # label of the notice being read, "" outside notices


def _find_units(doc: LoadedDocument, profile: _Profile, ctx: _Context) -> list[_Unit]:
    lines = _split_lines(doc.text)
    heading_starts = {h.start for h in doc.headings}
    state = _ScanState()
    units: list[_Unit] = []
    for i, line in enumerate(lines):
        is_heading = line.start in heading_starts
        text = _MD_PREFIX.sub("", line.text) if is_heading else line.text
        if not text:
            continue
        unit = _classify(_At(doc, profile, lines, i, text, is_heading), state)
        if unit is None:
            continue
        if unit.kind == "notice":
            unit.start = _absorb_title_lines(doc, lines, i, units[-1].start if units else 0)
        units.append(unit)
    units = _close_units(units, len(doc.text))
    front = _front_unit(profile, units[0].start if units else len(doc.text))
    units = ([front] if front.end > 0 else []) + units
    return _tidy_units(units, ctx)


@dataclass(frozen=True)
class _At:
    """The line being classified, with what the rules need to look around it."""

    doc: LoadedDocument
    profile: _Profile
    lines: list[_Line]
    i: int
    text: str  # the line, without Markdown heading marks
    is_heading: bool  # marked as a heading by the source format

    @property
    def start(self) -> int:
        return self.lines[self.i].start

    @property
    def next_line(self) -> int:
        return self.lines[self.i].end + 1

    def body_after(self, rest: str, offset: int) -> int:
        """Offset where a unit's body starts when its heading ends inside `rest` at `offset`."""
        return self.lines[self.i].end - len(rest) + offset if rest else self.next_line


def _classify(at: _At, state: _ScanState) -> _Unit | None:
    """The unit that starts at this line, if any. Rules are tried from most to least specific."""
    for rule in (_preamble_rule, _article_rule, _annex_rule, _divider_rule, _section_rule, _notice_rule):
        unit = rule(at, state)
        if unit is not None:
            return unit
    if at.is_heading:
        label = at.profile.title if at.text == at.profile.title else f"{at.profile.title} — {at.text}"
        return _Unit(at.start, at.next_line, label, at.text, "heading", citable=False)
    return None


def _preamble_rule(at: _At, state: _ScanState) -> _Unit | None:
    """EU recitals: numbered (1), (2), ... from "Whereas:" to "HAVE ADOPTED THIS REGULATION"."""
    if _ADOPTED.match(at.text):
        state.recital_next = 0
        return _Unit(at.start, at.next_line, at.text, at.text, _KIND_DIVIDER, subdivide=False, citable=False)
    if _WHEREAS.match(at.text):
        state.recital_next = 1
        return None
    m = _RECITAL.match(at.text) if state.recital_next else None
    if m and int(m.group(1)) == state.recital_next:
        state.recital_next += 1
        return _Unit(at.start, at.start, f"{at.profile.prefix} Recital {m.group(1)}", "", "recital", subdivide=False)
    return None


def _article_rule(at: _At, state: _ScanState) -> _Unit | None:
    m = (_ARTICLE_HEADING if at.is_heading else _ARTICLE).match(at.text)
    if not m or not _is_next_article(m, at, state):
        return None
    state.recital_next, state.annex, state.article = 0, "", _ordinal(m.group(1))
    title, body = _title_after(at.lines, at.i, m.group(2))
    return _Unit(at.start, body, f"{at.profile.prefix} Art. {m.group(1)}", title, "article")


def _annex_rule(at: _At, state: _ScanState) -> _Unit | None:
    if (m := _ANNEX.match(at.text)) and _is_next_annex(m, at.is_heading, state):
        state.recital_next, state.annex_number = 0, _ordinal(m.group(1))
        state.annex = f"{at.profile.prefix} Annex {m.group(1)}"
        title, body = _title_after(at.lines, at.i, m.group(2))
        return _Unit(at.start, body, state.annex, title, "annex")
    if state.annex and (m := _ANNEX_SECTION.match(at.text)):
        # Annexes have their own sections ("ANNEX XI ... Section 1"), numbered from 1 again.
        title, body = _title_after(at.lines, at.i, m.group(2))
        return _Unit(at.start, body, f"{state.annex}, Section {m.group(1)}", title, "annex_section")
    return None


def _divider_rule(at: _At, state: _ScanState) -> _Unit | None:
    """CHAPTER / Subchapter / (between EU articles) Section headings: they group units."""
    grouping_section = at.profile.has_articles and _BARE_SECTION.match(at.text)
    if not grouping_section and not (_DIVIDER.match(at.text) and _words(at.text) <= _MAX_TITLE_WORDS):
        return None
    state.annex = ""
    return _Unit(at.start, at.next_line, f"{at.profile.title} — {at.text}", at.text, _KIND_DIVIDER, citable=False)


def _section_rule(at: _At, state: _ScanState) -> _Unit | None:
    """`§ 20-871 Requirements ...` (a code section) or `Section 1.` / `§ 2.` (a bill or generic section)."""
    if m := _CODE_SECTION.match(at.text):
        rest = m.group(2) or ""
        if _starts_heading(rest):
            heading, offset = _inline_heading(rest)
            code = _code_body(at.profile, at.start, at.doc.text[at.start : at.start + 4000])
            return _Unit(at.start, at.body_after(rest, offset), f"{code} § {m.group(1)}", heading, "section")
    if m := _PLAIN_SECTION.match(at.text):
        rest = m.group(2) or ""
        if _starts_heading(rest):
            heading, offset = _inline_heading(rest)
            # Sections of a bill or a notice are cited by the instrument: "Int. No. 1894-A § 2".
            owner = state.notice or at.profile.bill or at.profile.title
            return _Unit(at.start, at.body_after(rest, offset), f"{owner} § {m.group(1)}", heading, "section")
    return None


def _starts_heading(rest: str) -> bool:
    # "§ 20-870 of the Code" is a cross-reference wrapped to the start of a line, not a section.
    return not rest or rest[0].isupper() or rest[0] in "“\""


def _notice_rule(at: _At, state: _ScanState) -> _Unit | None:
    """An agency's notice of rulemaking and its statement of basis and purpose (not operative text)."""
    if m := _NOTICE.match(at.text):
        kind = f"Notice of {m.group(1).split()[0].title()}"
        state.notice = f"{at.profile.issuer} {kind}" if at.profile.issuer else kind
        return _Unit(at.start, at.next_line, state.notice, at.text, "notice", subdivide=False, citable=False)
    if _BASIS.match(at.text):
        label = f"{state.notice or at.profile.title} (Statement of Basis and Purpose)"
        return _Unit(at.start, at.next_line, label, at.text, "notice", subdivide=False, citable=False)
    return None


def _ordinal(token: str) -> float:
    """Sort value of an article/annex number: "26" -> 26, "4a" -> 4.5, "III" -> 3, "B" -> 2."""
    if m := re.fullmatch(r"(\d+)([a-z]?)", token):
        return int(m.group(1)) + (0.5 if m.group(2) else 0)
    if re.fullmatch(r"[IVXLC]+", token):
        return _roman_value(token.lower()) or 0
    return ord(token[0].upper()) - 64


def _is_next_article(m: re.Match, at: _At, state: _ScanState) -> bool:
    """Tell an article heading from a cross-reference that a line break left alone on a line.

    Articles are numbered in order, so "Article 49." inside Article 26 is a reference. Inside the
    recitals only Article 1 can start the enacting terms.
    """
    number = _ordinal(m.group(1))
    if state.recital_next:
        return number == 1
    if at.is_heading:
        return number > state.article
    inline_title = m.group(2)
    if inline_title and _words(inline_title) > 10:
        return False
    if number == state.article + 1 or (state.article == 0 and inline_title) or number == state.article + 0.5:
        return True
    # A gap in the numbering is believable only for an EU-style heading with its title below.
    return number > state.article and not inline_title and bool(_title_after(at.lines, at.i, None)[0])


def _is_next_annex(m: re.Match, is_heading: bool, state: _ScanState) -> bool:
    number = _ordinal(m.group(1))
    if state.annex_number == 0:
        # The first annex must look like one: "ANNEX I", a real heading, or numbered 1.
        return is_heading or m.group(0).startswith(("ANNEX", "APPENDIX")) or number == 1
    return number == state.annex_number + 1 or (is_heading and number > state.annex_number)


def _title_after(lines: list[_Line], i: int, inline: str | None) -> tuple[str, int]:
    """A unit's title: on the heading line ("Article 4 - Scope") or the next line (EU style)."""
    if inline:
        return inline.strip(), lines[i].end + 1
    for j in range(i + 1, min(i + 3, len(lines))):
        candidate = lines[j].text.strip()
        if not candidate:
            continue
        if _looks_like_title(candidate):
            return candidate, lines[j].end + 1
        break
    return "", lines[i].end + 1


def _looks_like_title(line: str) -> bool:
    return (
        _words(line) <= _MAX_TITLE_WORDS
        and not _MARKER.match(line)
        and not line.endswith((".", ";", ",", ":"))
        and not _ARTICLE.match(line)
        and line[0].isalpha()
    )


_INLINE_HEADING = re.compile(r"^(.{2,120}?[^.\s]\.)(?=\s+\S|\s*$)")


def _inline_heading(rest: str) -> tuple[str, int]:
    """Split "Definitions. For the purposes of ..." into ("Definitions.", offset of the body)."""
    m = _INLINE_HEADING.match(rest)
    if m and _words(m.group(1)) <= 8:
        return m.group(1), m.end()
    return "", 0


def _absorb_title_lines(doc: LoadedDocument, lines: list[_Line], i: int, floor: int) -> int:
    """Start a notice at the issuer lines above its title ("Department of ...") on the same page."""
    page = doc.page_at(lines[i].start)
    start = lines[i].start
    for j in range(i - 1, -1, -1):
        line = lines[j]
        if line.start <= floor or doc.page_at(line.start) != page:
            break
        text = line.text
        if text and not (_words(text) <= 12 and text[0].isupper() and not text.endswith((".", ";", ",", ")"))):
            break
        if text:
            start = line.start
    return start


def _close_units(units: list[_Unit], text_end: int) -> list[_Unit]:
    for unit, nxt in zip(units, units[1:] + [None]):
        unit.end = nxt.start if nxt else text_end
        unit.body_start = min(max(unit.body_start, unit.start), unit.end)
    return units


def _front_unit(profile: _Profile, end: int) -> _Unit:
    """The text before the first unit: an EU preamble, a bill's title and sponsors, or plain text."""
    if profile.eu:
        return _Unit(0, 0, f"{profile.prefix} preamble", "", _KIND_FRONT, subdivide=False, citable=False, end=end)
    if profile.bill:
        return _Unit(0, 0, profile.bill, "", _KIND_FRONT, subdivide=False, citable=False, end=end)
    return _Unit(0, 0, "", "", _KIND_FRONT, subdivide=False, citable=False, end=end)


def _tidy_units(units: list[_Unit], ctx: _Context) -> list[_Unit]:
    """Drop heading-only dividers; fold an annex's bare title into its first section."""
    out: list[_Unit] = []
    for unit in units:
        if out and out[-1].kind in (_KIND_FRONT, "heading") and ctx.tokens(out[-1].start, out[-1].end) < ctx.min_tokens:
            # A bare title ("# Widget Regulation") before the first section is kept with that section.
            unit.start = out.pop().start
        body = _strip_span(ctx.text, unit.body_start, unit.end)
        if unit.kind == _KIND_DIVIDER and ctx.tokens(*body) < ctx.min_tokens:
            # Nothing but the heading (and maybe its title line): it carries no content.
            continue
        if (
            out
            and unit.kind == "annex_section"
            and out[-1].kind == "annex"
            and unit.label.startswith(out[-1].label + ",")
            and ctx.tokens(out[-1].start, out[-1].end) < ctx.min_tokens
        ):
            unit.start = out.pop().start
        out.append(unit)
    return out


# --- subdivisions inside a unit --------------------------------------------------------------------

# (a) (1) (i) (A) or a. 1. i. at the start of a line, followed by text.
_MARKER = re.compile(r"(?:\((?P<p>[a-z]{1,5}|[A-Z]|\d{1,3})\)|(?P<d>[a-z]{1,5}|\d{1,3})\.)(?=\s|$)")
# Words that show "(c) of section 2000e-8" is a wrapped cross-reference, not a subdivision.
_REFERENCE_CONTINUATION = re.compile(r"\s+(?:of|and|or|thereof|shall|is|are)\b")
_ROMAN = re.compile(r"^(x{0,3})(ix|iv|v?i{0,3})$")
_ROMAN_SUCCESSOR = {"i": "ii", "v": "vi", "x": "xi"}
_EXAMPLE = re.compile(r"^Example(?:\s+(\d+))?\s*[:.]")
_DEFINED_TERM = re.compile(r"^([A-Z][^\n“”\"‘’.:;]{1,90}?)\.\s*(?:The term\s+)?[“\"‘]", re.M)
_MINOR_WORDS = frozenset("a an and as at by for in of on or the to with".split())
_VERBS = re.compile(r"\b(?:shall|must|may|will|is|are|was|were|be|means|apply|applies|has|have)\b", re.I)
_SUB_HEADING = re.compile(r"^([A-Z][^.\n]{1,80}?\.)\s+(?=[A-Z“\"])")


@dataclass
class _Node:
    start: int
    end: int
    kind: str  # "enum", "term", "example"
    token: str = ""  # "(a)" for enumerations, "Example 2" for examples
    heading: str = ""
    children: list["_Node"] = field(default_factory=list)
    level: int = 0


def _subdivisions(unit: _Unit, ctx: _Context) -> list[_Node]:
    if not unit.subdivide:
        return []
    if re.search(r"definition", unit.heading, re.I):
        terms = _term_nodes(unit, ctx.text)
        if len(terms) >= 2:
            return terms
    return _enum_tree(unit, ctx.text)


def _term_nodes(unit: _Unit, text: str) -> list[_Node]:
    body = text[unit.body_start : unit.end]
    starts = [(unit.body_start + m.start(), m.group(1).strip()) for m in _DEFINED_TERM.finditer(body)]
    return [
        _Node(start, nxt, "term", heading=term)
        for (start, term), nxt in zip(starts, [s for s, _ in starts[1:]] + [unit.end])
    ]


def _marker_positions(unit: _Unit, text: str) -> list[int]:
    """Line starts inside the unit body, plus the body start itself ("§ 20-872 Penalties. a. Any")."""
    positions = [unit.body_start]
    pos = text.find("\n", unit.body_start, unit.end)
    while pos != -1:
        positions.append(pos + 1)
        pos = text.find("\n", pos + 1, unit.end)
    # Skip indentation so that a marker after "Penalties. " is seen.
    return [p + len(text[p:unit.end]) - len(text[p:unit.end].lstrip(" ")) for p in positions if p < unit.end]


def _interpretations(m: re.Match) -> list[tuple[str, int]]:
    """Possible (style, value) readings of a marker: "(i)" is letter 9 or roman 1."""
    paren = m.group("p") is not None
    token = m.group("p") if paren else m.group("d")
    shape = "p" if paren else "d"
    if token.isdigit():
        return [(shape + "num", int(token))]
    if token.isupper():
        return [(shape + "upper", ord(token) - 64)]
    readings = [(shape + "alpha", ord(token) - 96)] if len(token) == 1 else []
    if (roman := _roman_value(token)) is not None:
        readings.append((shape + "roman", roman))
    return readings


def _roman_value(token: str) -> int | None:
    m = _ROMAN.match(token)
    if not token or not m:
        return None
    values = {"i": 1, "v": 5, "x": 10}
    total = 0
    for a, b in zip(token, token[1:] + " "):
        v = values[a]
        total += -v if b != " " and values.get(b, 0) > v else v
    return total


def _accept(stack: list[list], readings: list[tuple[str, int]], top_only: bool) -> int | None:
    """Level of a marker given the open enumeration levels, or None if it does not fit.

    A marker continues an open level (its value is the next one) or opens a new deeper level
    (its value is the first one and its style is not already open). The stack is updated.
    """
    for style, value in readings:
        for level in range(len(stack) - 1, -1, -1):
            if top_only and level > 0:
                continue
            if stack[level][0] == style and value == stack[level][1] + 1:
                del stack[level + 1 :]
                stack[level][1] = value
                return level
    if top_only:
        return None
    for style, value in readings:
        if value == 1 and all(s != style for s, _ in stack) and len(stack) < _MAX_DEPTH:
            stack.append([style, 1])
            return len(stack) - 1
    return None


def _enum_tree(unit: _Unit, text: str) -> list[_Node]:
    """The unit's subdivisions as a tree: (a) > (1) > (i), with worked examples at the top level."""
    candidates = _candidate_lines(unit, text)
    flat: list[_Node] = []
    stack: list[list] = []
    in_example = False
    for k, (pos, line, m) in enumerate(candidates):
        if m is None:  # a worked example
            ex = _EXAMPLE.match(line)
            assert ex is not None  # _candidate_lines put it here because it matched
            token = f"Example {ex.group(1)}" if ex.group(1) else "Example"
            flat.append(_Node(pos, unit.end, "example", token=token, level=0))
            in_example = True
            continue
        readings = _interpretations(m)
        if len(readings) == 2 and _roman_follows(k, candidates):
            readings = readings[1:]
        # Inside a worked example only a next top-level subdivision ends it.
        level = _accept(stack, readings, top_only=in_example)
        if level is None:
            continue
        in_example = False
        token = m.group(0) if m.group("p") else f"({m.group('d')})"
        # The heading may sit on the marker's line or, in some layouts, on the next one.
        after = text[pos + m.end() : min(unit.end, pos + m.end() + 200)]
        flat.append(_Node(pos, unit.end, "enum", token=token, heading=_sub_heading(after), level=level))
    return _nest(flat, unit.end)


def _candidate_lines(unit: _Unit, text: str) -> list[tuple[int, str, re.Match | None]]:
    """Lines that open with a subdivision marker (match) or a worked example (None)."""
    out: list[tuple[int, str, re.Match | None]] = []
    for pos in _marker_positions(unit, text):
        line = _line_at(text, pos, unit.end)
        if _EXAMPLE.match(line):
            out.append((pos, line, None))
        elif (m := _MARKER.match(line)) and not _REFERENCE_CONTINUATION.match(line, m.end()):
            out.append((pos, line, m))
    return out


def _roman_follows(k: int, candidates: list[tuple[int, str, re.Match | None]]) -> bool:
    """Is the "(i)" at k the first of (i), (ii), ... rather than the letter after (h)?

    Decided by which comes first among the later markers of the same shape: "(ii)" or "(j)".
    """
    m = candidates[k][2]
    assert m is not None  # called for a marker, not an example
    paren = m.group("p") is not None
    token = m.group("p") if paren else m.group("d")
    roman_next, letter_next = _ROMAN_SUCCESSOR.get(token), chr(ord(token) + 1)
    for _, _, later in candidates[k + 1 :]:
        if later is None or (later.group("p") is not None) != paren:
            continue
        later_token = later.group("p") or later.group("d")
        if later_token == roman_next:
            return True
        if later_token == letter_next:
            return False
    return False


def _line_at(text: str, pos: int, limit: int) -> str:
    end = text.find("\n", pos, limit)
    return text[pos : end if end != -1 else limit]


def _sub_heading(after_marker: str) -> str:
    """The heading a subdivision may open with: "b. Notices required. In the city, ..."."""
    m = _SUB_HEADING.match(after_marker.lstrip(" \n"))
    if not m or _VERBS.search(m.group(1)):
        return ""
    words = m.group(1).rstrip(".").split()
    # "Notices required." / "Historical Data." / "Notice to Candidates and Employees." are headings;
    # "Sellers label gadgets." is a short sentence.
    title_case = all(w[0].isupper() or w in _MINOR_WORDS for w in words)
    return m.group(1) if len(words) <= 2 or (title_case and len(words) <= 6) else ""


def _nest(flat: list[_Node], end: int) -> list[_Node]:
    """Give each node its end (the next node at the same or a higher level) and its children."""
    roots: list[_Node] = []
    open_nodes: list[_Node] = []
    for node in flat:
        while open_nodes and open_nodes[-1].level >= node.level:
            open_nodes.pop().end = node.start
        (open_nodes[-1].children if open_nodes else roots).append(node)
        open_nodes.append(node)
    for node in open_nodes:
        node.end = end
    return roots


# --- planning: which spans become chunks -----------------------------------------------------------


@dataclass(frozen=True)
class _Group:
    start: int
    end: int
    label: str  # "" = label by page ("<title>, p. N") for text without structure
    heading: str


def _plan_unit(unit: _Unit, ctx: _Context) -> list[_Group]:
    children = _subdivisions(unit, ctx)
    if not children:
        return [_Group(unit.start, unit.end, unit.label, unit.heading)]
    return _plan_children(unit.start, children, unit.label, unit.heading, unit.citable, ctx)


def _child_label(base: str, token: str, citable: bool) -> str:
    return f"{base}{token}" if citable else f"{base} {token}"


def _plan_children(
    lead_start: int, children: list[_Node], base: str, heading: str, citable: bool, ctx: _Context
) -> list[_Group]:
    """One group per child, the lead-in text before the first child kept with it when short."""
    groups: list[_Group] = []
    first_start = children[0].start
    lead = _strip_span(ctx.text, lead_start, first_start)
    if lead[1] > lead[0] and ctx.tokens(*lead) >= ctx.min_tokens:
        groups.append(_Group(lead_start, first_start, base, heading))
        lead_start = first_start
    previous_label = base
    for run in _runs(children, ctx, glue_start=lead_start):
        start = lead_start if run[0] is children[0] else run[0].start
        label, run_heading = _run_label(run, base, heading, citable, previous_label)
        node = run[0]
        if len(run) == 1 and node.children and ctx.tokens(start, node.end) > ctx.budget:
            # Too long as a whole: descend into its own subdivisions.
            groups.extend(_plan_children(start, node.children, label, run_heading, True, ctx))
        else:
            groups.append(_Group(start, run[-1].end, label, run_heading))
        if run[-1].kind == "enum":
            previous_label = label if len(run) == 1 else _child_label(base, run[-1].token, citable)
    return groups


def _runs(children: list[_Node], ctx: _Context, glue_start: int) -> list[list[_Node]]:
    """Consecutive siblings grouped so that no group is tiny (examples always stand alone).

    `glue_start` is where the first child's text begins once a short lead-in is glued to it.
    """

    def start_of(run: list[_Node]) -> int:
        return glue_start if run[0] is children[0] else run[0].start

    runs: list[list[_Node]] = []
    for node in children:
        if runs and _can_glue(runs[-1], node, ctx, start_of(runs[-1])):
            runs[-1].append(node)
        else:
            runs.append([node])
    # A tiny last run joins the one before it when they fit together.
    if len(runs) > 1 and _gluable(runs[-2] + runs[-1]):
        prev, last = runs[-2], runs[-1]
        tiny = ctx.tokens(last[0].start, last[-1].end) < ctx.min_tokens
        if tiny and ctx.tokens(start_of(prev), last[-1].end) <= ctx.budget:
            runs[-2:] = [prev + last]
    return runs


def _gluable(nodes: list[_Node]) -> bool:
    return len({n.kind for n in nodes}) == 1 and nodes[0].kind in ("enum", "term")


def _can_glue(run: list[_Node], node: _Node, ctx: _Context, run_start: int) -> bool:
    if not _gluable(run + [node]):
        return False
    return ctx.tokens(run_start, run[-1].end) < ctx.min_tokens and ctx.tokens(run_start, node.end) <= ctx.budget


def _run_label(run: list[_Node], base: str, heading: str, citable: bool, previous_label: str) -> tuple[str, str]:
    first, last = run[0], run[-1]
    if first.kind == "example":
        return f"{previous_label}, {first.token}", _join_heading(heading, first.token)
    if first.kind == "term":
        return base, _join_heading(heading, "; ".join(n.heading for n in run))
    if len(run) == 1:
        return _child_label(base, first.token, citable), _join_heading(heading, first.heading)
    return f"{_child_label(base, first.token, citable)}–{last.token}", heading


def _join_heading(parent: str, own: str) -> str:
    if not own:
        return parent
    return f"{parent.rstrip('.')} — {own}" if parent else own


# --- splitting and chunk records ------------------------------------------------------------------

# Sentences (and list items ending in ; or :) first, so that the overlap between pieces is a
# few whole sentences; then lines (tables have no sentence ends), words, characters.
_SEPARATORS = [r"(?<=[.;:!?])\s+", r"\n", r" ", r""]


def _split_spans(start: int, end: int, ctx: _Context, budget: int | None = None) -> list[tuple[int, int]]:
    """Pieces of text[start:end], each within the token budget, neighbours overlapping."""
    budget = budget or ctx.budget
    start, end = _strip_span(ctx.text, start, end)
    if end <= start:
        return []
    if ctx.tokens(start, end) <= ctx.budget:
        return [(start, end)]
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    overlap = min(ctx.overlap * budget // ctx.budget, budget - 1)
    splitter = RecursiveCharacterTextSplitter(
        chunk_size=budget,
        chunk_overlap=overlap,
        length_function=ctx.count,
        separators=_SEPARATORS,
        is_separator_regex=True,
        keep_separator="end",
    )
    segment = ctx.text[start:end]
    spans: list[tuple[int, int]] = []
    cursor = 0
    for piece in splitter.split_text(segment):
        # Pieces come back in order and verbatim (whitespace-stripped): find each after the last start.
        at = segment.find(piece, cursor)
        if at < 0:
            raise AssertionError("text splitter returned text that is not in the document")
        spans.append((start + at, start + at + len(piece)))
        cursor = at + 1
    return _enforce_budget(spans, ctx, budget)


def _enforce_budget(spans: list[tuple[int, int]], ctx: _Context, budget: int) -> list[tuple[int, int]]:
    # The splitter adds up token counts of its parts; a tokenizer is not exactly additive, so a
    # merged piece can come out a few tokens over. Such pieces are split again, more tightly.
    out: list[tuple[int, int]] = []
    for a, b in spans:
        size = ctx.tokens(a, b)
        if size <= ctx.budget:
            out.append((a, b))
        elif budget > 8:
            out.extend(_split_spans(a, b, ctx, budget=max(8, int(budget * ctx.budget / size) - 2)))
        else:
            raise ValueError(f"cannot split text into pieces of {ctx.budget} tokens: {ctx.text[a:b][:80]!r}")
    return out


def _make_chunks(
    doc: LoadedDocument, groups: list[_Group], ctx: _Context, *, collection: str, doc_id: str, title: str
) -> list[Chunk]:
    chunks: list[Chunk] = []
    ordinals: dict[str, int] = {}
    for group in groups:
        for start, end in _split_spans(group.start, group.end, ctx):
            text = doc.text[start:end]
            if not any(ch.isalnum() for ch in text):
                continue
            page_start, page_end = doc.page_at(start), doc.page_at(end - 1)
            label = group.label or f"{title}, p. {page_start}"
            ordinal = ordinals.get(label, 0)
            ordinals[label] = ordinal + 1
            chunks.append(
                Chunk(
                    id=_chunk_id(collection, doc_id, label, ordinal, text),
                    collection=collection,
                    doc_id=doc_id,
                    doc_title=doc.title,
                    label=label,
                    heading=group.heading,
                    text=text,
                    page_start=page_start,
                    page_end=page_end,
                    char_start=start,
                    char_end=end,
                    role=chunk_role(label, group.heading),
                )
            )
    return chunks


def _chunk_id(collection: str, doc_id: str, label: str, ordinal: int, text: str) -> str:
    key = "\x1f".join([collection, doc_id, label, str(ordinal), text])
    return hashlib.sha1(key.encode("utf-8")).hexdigest()
