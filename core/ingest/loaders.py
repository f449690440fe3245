"""Read a regulation file (PDF, Markdown, plain text, HTML) into one normalised text with page offsets.

Everything downstream cites `LoadedDocument.text` by character offsets, so all clean-up (ligatures,
odd spaces, running page headers, hyphenation) happens here, before the text is assembled:
offsets into the returned text are then consistent by construction.
"""
from __future__ import annotations

import bisect
import contextlib
import hashlib
import io
import logging
import re
import unicodedata
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from core.errors import DocumentError

PDF_SUFFIXES = (".pdf",)
MARKDOWN_SUFFIXES = (".md", ".markdown")
TEXT_SUFFIXES = (".txt",)
HTML_SUFFIXES = (".html", ".htm")
SUPPORTED_SUFFIXES = PDF_SUFFIXES + MARKDOWN_SUFFIXES + TEXT_SUFFIXES + HTML_SUFFIXES

log = logging.getLogger(__name__)

# A document needs at least this many letters/digits to be worth indexing; fewer means an
# empty file or a scanned PDF without a text layer.
_MIN_TEXT_CHARS = 20


@dataclass(frozen=True)
class Heading:
    """A heading the source format marks explicitly (Markdown `#`, HTML <h1>-<h6>)."""

    start: int  # char offsets of the heading line in LoadedDocument.text
    end: int
    level: int  # 1 = top level
    title: str  # the heading text without markup


@dataclass(frozen=True)
class LoadedDocument:
    path: Path
    title: str
    text: str  # full extracted text, pages joined with "\n"
    page_starts: list[int]  # char offset at which each page begins (page 1 at index 0)
    content_hash: str  # sha256 of the file's bytes
    headings: tuple[Heading, ...] = field(default=())

    @property
    def page_count(self) -> int:
        return len(self.page_starts)

    def page_at(self, offset: int) -> int:
        """1-based page holding the character at `offset`."""
        return max(1, bisect.bisect_right(self.page_starts, offset))


def load_document(path: Path) -> LoadedDocument:
    """Read `path` into a LoadedDocument, or raise DocumentError saying why it cannot be read."""
    path = Path(path)
    if not path.exists():
        raise DocumentError(f"{path}: file not found")
    if not path.is_file():
        raise DocumentError(f"{path}: not a regular file")
    suffix = path.suffix.lower()
    if suffix not in SUPPORTED_SUFFIXES:
        supported = ", ".join(SUPPORTED_SUFFIXES)
        raise DocumentError(
            f"{path.name}: unsupported file type '{suffix or '(none)'}' (supported: {supported})"
        )
    data = path.read_bytes()
    if not data.strip():
        raise DocumentError(f"{path.name}: the file is empty, there is no text to index")

    if suffix in PDF_SUFFIXES:
        pages, title, headings = _read_pdf(data, path.name)
    elif suffix in HTML_SUFFIXES:
        pages, title, headings = _read_html(_decode(data, path.name))
    elif suffix in MARKDOWN_SUFFIXES:
        pages, title, headings = _read_markdown(_decode(data, path.name))
    else:
        pages, title, headings = _read_plain(_decode(data, path.name))

    text, page_starts = _join_pages(pages)
    if sum(ch.isalnum() for ch in text) < _MIN_TEXT_CHARS:
        if suffix in PDF_SUFFIXES:
            raise DocumentError(
                f"{path.name}: no extractable text in {len(pages)} page(s); it looks like a scanned "
                "image without a text layer (run OCR on it first)"
            )
        raise DocumentError(f"{path.name}: no extractable text (the file is blank)")
    return LoadedDocument(
        path=path,
        title=title or _first_meaningful_line(text) or path.stem,
        text=text,
        page_starts=page_starts,
        content_hash=hashlib.sha256(data).hexdigest(),
        headings=tuple(headings),
    )


# --- character-level normalisation -----------------------------------------------------------

_CHAR_MAP = str.maketrans(
    {
        "\ufb00": "ff", "\ufb01": "fi", "\ufb02": "fl", "\ufb03": "ffi", "\ufb04": "ffl",
        "\ufb05": "st", "\ufb06": "st",
        "\u00a0": " ", "\u2007": " ", "\u202f": " ", "\u205f": " ", "\u3000": " ", "\t": " ",
        "\u00ad": "", "\u200b": "", "\u200c": "", "\u200d": "", "\u2060": "", "\ufeff": "",
        # Symbol/Wingdings bullets that PDF producers map into the private use area.
        "\uf0b7": "•", "\uf0a7": "•", "\uf0d8": "•", "\uf076": "•", "\u25aa": "•",
        # The European Parliament's "▌" marks deleted text in consolidated versions: not content.
        "\u258c": "",
        "\r": "", "\x0c": "\n", "\x0b": "\n",
    }
)
_SPACES = re.compile(r"[ \u2000-\u200a]+")
_BLANK_RUNS = re.compile(r"\n{3,}")


def normalize_text(raw: str) -> str:
    """Fix ligatures/odd spaces, trim every line, keep at most one blank line between paragraphs."""
    text = raw.replace("\r\n", "\n").translate(_CHAR_MAP)
    # Remaining control characters (never meaningful in a regulation) are dropped.
    text = "".join(ch for ch in text if ch == "\n" or unicodedata.category(ch) != "Cc")
    lines = [_SPACES.sub(" ", line).strip() for line in text.split("\n")]
    return _BLANK_RUNS.sub("\n\n", "\n".join(lines)).strip("\n")


def _join_pages(pages: list[str]) -> tuple[str, list[int]]:
    starts: list[int] = []
    offset = 0
    for page in pages:
        starts.append(offset)
        offset += len(page) + 1  # the "\n" that joins pages
    return "\n".join(pages), starts or [0]


def _decode(data: bytes, name: str) -> str:
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        try:
            return data.decode("utf-16")
        except UnicodeDecodeError as exc:
            raise DocumentError(f"{name}: invalid UTF-16 text ({exc})") from exc
    if b"\x00" in data[:4096]:
        raise DocumentError(f"{name}: looks like a binary file, not text")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        pass
    # Legacy Windows text is the usual non-UTF-8 case; cp1252 maps almost every byte.
    return data.decode("cp1252", errors="replace")


# --- PDF --------------------------------------------------------------------------------------


def _read_pdf(data: bytes, name: str) -> tuple[list[str], str, list[Heading]]:
    from pypdf import PdfReader
    from pypdf.errors import PyPdfError

    if b"%PDF" not in data[:1024]:
        raise DocumentError(f"{name}: not a valid PDF (no PDF header); the file is corrupt or not a PDF")
    with _pypdf_warnings() as warnings:
        try:
            reader = PdfReader(io.BytesIO(data))
            _unlock(reader, name)
            raw_pages = [page.extract_text() or "" for page in reader.pages]
            metadata_title = (reader.metadata.title if reader.metadata else None) or ""
        except DocumentError:
            raise
        except PyPdfError as exc:
            raise DocumentError(
                f"{name}: cannot read the PDF, it looks corrupt or truncated ({_with_warnings(exc, warnings)})"
            ) from exc
        except Exception as exc:  # noqa: BLE001 - malformed PDFs surface as arbitrary errors deep in pypdf
            raise DocumentError(
                f"{name}: cannot read the PDF, it looks corrupt ({type(exc).__name__}: {_with_warnings(exc, warnings)})"
            ) from exc
    if not raw_pages:
        raise DocumentError(f"{name}: the PDF has no pages")

    page_lines = [normalize_text(p).split("\n") if p.strip() else [] for p in raw_pages]
    page_lines = _drop_running_lines(page_lines)
    page_lines = _drop_repeated_carry_over(page_lines)
    pages = ["\n".join(lines).strip("\n") for lines in page_lines]
    pages = _rejoin_hyphenated(pages)
    title = _clean_metadata_title(metadata_title) or _short_title("\n".join(pages[:3]))
    return pages, title, []


@contextlib.contextmanager
def _pypdf_warnings() -> Iterator[list[str]]:
    """Collect what pypdf logs while reading (e.g. "EOF marker not found") instead of letting it reach
    the console: without a configured handler Python prints library warnings to stderr, which put a
    stray line before hypa's own one-line error. On failure the collected lines join that error; on
    success they go to the debug log. (pypdf's logger is process-wide; ingest reads one file at a time.)"""
    collected: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            collected.append(record.getMessage())

    pypdf_log = logging.getLogger("pypdf")
    handler = Collect(logging.WARNING)
    propagate = pypdf_log.propagate
    pypdf_log.addHandler(handler)
    pypdf_log.propagate = False
    try:
        yield collected
    finally:
        pypdf_log.removeHandler(handler)
        pypdf_log.propagate = propagate
        for line in collected:
            log.debug("pypdf: %s", line)


def _with_warnings(exc: BaseException, warnings: list[str]) -> str:
    """The error, preceded by what pypdf warned about first (often the actual cause)."""
    told = [w for w in dict.fromkeys(warnings) if w not in str(exc)][:2]
    return "; ".join([*told, str(exc)])


def _unlock(reader, name: str) -> None:  # noqa: ANN001 - pypdf.PdfReader
    if not reader.is_encrypted:
        return
    try:
        # Many "encrypted" PDFs only restrict printing and open with an empty password.
        opened = reader.decrypt("")
    except Exception as exc:  # pypdf raises several types here (DependencyError, NotImplementedError)
        raise DocumentError(f"{name}: the PDF is encrypted and cannot be opened ({exc})") from exc
    if not opened:
        raise DocumentError(f"{name}: the PDF is password-protected; save an unprotected copy and retry")


_DIGITS = re.compile(r"\d+")


def _running_key(line: str) -> str:
    # Page numbers and dates change from page to page; the rest of a running header does not.
    return _DIGITS.sub("#", line.lower())


def _drop_running_lines(pages: list[list[str]], edge: int = 3) -> list[list[str]]:
    """Remove headers/footers: lines that recur at the top or bottom of most pages.

    Only the first/last `edge` non-blank lines of a page are candidates, so body text that
    happens to repeat (a recurring table row, a refrain) is never touched.
    """
    if len(pages) < 3:
        return pages

    def edge_positions(lines: list[str]) -> list[int]:
        filled = [i for i, line in enumerate(lines) if line]
        return sorted(set(filled[:edge] + filled[-edge:]))

    counts: Counter[str] = Counter()
    for lines in pages:
        counts.update({_running_key(lines[i]) for i in edge_positions(lines)})
    threshold = max(3, (len(pages) + 1) // 2)
    running = {key for key, n in counts.items() if n >= threshold}
    if not running:
        return pages
    cleaned = []
    for lines in pages:
        drop = {i for i in edge_positions(lines) if _running_key(lines[i]) in running}
        cleaned.append(_trim_blank([line for i, line in enumerate(lines) if i not in drop]))
    return cleaned


def _drop_repeated_carry_over(pages: list[list[str]]) -> list[list[str]]:
    """Some producers (e.g. Legistar) repeat the last line of a page at the top of the next one."""
    out = [list(lines) for lines in pages]
    for prev, cur in zip(out, out[1:]):
        last = next((line for line in reversed(prev) if line), "")
        first_i = next((i for i, line in enumerate(cur) if line), None)
        if first_i is not None and len(last) >= 20 and cur[first_i] == last:
            del cur[first_i]
            cur[:] = _trim_blank(cur)
    return out


def _trim_blank(lines: list[str]) -> list[str]:
    start, end = 0, len(lines)
    while start < end and not lines[start]:
        start += 1
    while end > start and not lines[end - 1]:
        end -= 1
    return lines[start:end]


_WORD = re.compile(r"[A-Za-z]+(?:-[A-Za-z]+)*")
_LINE_END_HYPHEN = re.compile(r"\b([A-Za-z]+)-\n([a-z][A-Za-z]*)|(?<=\d)-\n(?=\d)")


def _rejoin_hyphenated(pages: list[str]) -> list[str]:
    """Undo line-end hyphenation, deciding from the document's own vocabulary.

    "decision-\\nmaking" keeps its hyphen unless "decisionmaking" is used elsewhere and
    "decision-making" is not; "regu-\\nlation" becomes "regulation" because only that form
    occurs in the text. Numbers broken after a hyphen ("§ 5-\\n249") are re-joined as "5-249".
    """
    # A word broken at a line end is not in this vocabulary: "-\\n" splits it in two.
    vocabulary = Counter(w.lower() for page in pages for w in _WORD.findall(page))

    def fix(m: re.Match) -> str:
        if m.group(1) is None:  # digits: keep the hyphen, drop the break
            return "-"
        head, tail = m.group(1), m.group(2)
        if vocabulary[(head + tail).lower()] and not vocabulary[f"{head}-{tail}".lower()]:
            return head + tail
        return f"{head}-{tail}"

    return [_LINE_END_HYPHEN.sub(fix, page) for page in pages]


def _clean_metadata_title(title: str) -> str:
    title = " ".join(str(title).split())
    title = re.sub(r"^(Microsoft (Word|PowerPoint) - )", "", title)
    title = re.sub(r"\.(docx?|pdf|rtf|odt)$", "", title, flags=re.I)
    # Producer placeholders ("CO_TA", "untitled", "Document1") are not titles.
    if len(title) < 8 or " " not in title or title.lower().startswith(("untitled", "document")):
        return ""
    return title


_SHORT_TITLE = re.compile(r"\(([A-Z][A-Za-z]+(?: [A-Za-z]+){0,6} (?:Act|Regulation|Code|Law))\)")


def _short_title(text: str) -> str:
    """An official short title given in parentheses, e.g. "(Artificial Intelligence Act)"."""
    m = _SHORT_TITLE.search(" ".join(text[:6000].split()))
    return m.group(1) if m else ""


def _first_meaningful_line(text: str) -> str:
    for line in text[:5000].split("\n"):
        line = line.strip(" #*=-_:")
        if not line:
            continue
        # A title is a short line; a first line that is a whole paragraph means there is none.
        if len(line) <= 120 and _words_in(line) <= 14 and len(re.findall(r"[A-Za-z]", line)) >= 4:
            return line
        return ""
    return ""


def _words_in(line: str) -> int:
    return len(line.split())


# --- Markdown, plain text, HTML ---------------------------------------------------------------

_MD_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")


def _read_markdown(raw: str) -> tuple[list[str], str, list[Heading]]:
    text = normalize_text(raw)
    headings: list[Heading] = []
    offset = 0
    in_code = False
    for line in text.split("\n"):
        if line.startswith("```"):
            in_code = not in_code  # "# comment" lines inside code blocks are not headings
        m = None if in_code else _MD_HEADING.match(line)
        if m:
            headings.append(Heading(offset, offset + len(line), len(m.group(1)), m.group(2).strip()))
        offset += len(line) + 1
    top = min(headings, key=lambda h: (h.level, h.start)) if headings else None
    return [text], (top.title if top else ""), headings


def _read_plain(raw: str) -> tuple[list[str], str, list[Heading]]:
    # Form feeds are the one page marker plain text has.
    pages = [normalize_text(p) for p in raw.split("\x0c")]
    return pages, "", []


# Private-use sentinels mark heading lines through get_text() and whitespace normalisation;
# they are removed again before the text is returned.
_HEADING_MARK = "\ue000"
_BLOCK_TAGS = (
    "address", "article", "aside", "blockquote", "dd", "div", "dl", "dt", "figcaption", "figure",
    "footer", "form", "header", "hr", "li", "main", "nav", "ol", "p", "pre", "section", "table",
    "tbody", "td", "tfoot", "th", "thead", "tr", "ul", "caption",
)


def _read_html(raw: str) -> tuple[list[str], str, list[Heading]]:
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(raw, "html.parser")
    title_tag = soup.find("title")
    html_title = " ".join(title_tag.get_text().split()) if title_tag else ""
    for tag in soup(["script", "style", "noscript", "template", "head"]):
        tag.decompose()
    for br in soup.find_all("br"):
        br.replace_with("\n")
    for tag in soup.find_all(_BLOCK_TAGS):
        tag.insert_before("\n")
        tag.insert_after("\n")
    for tag in soup.find_all(re.compile(r"^h[1-6]$")):
        # One line per heading, whatever inline markup or line breaks it contains.
        title = " ".join(tag.get_text().split())
        tag.replace_with(f"\n{_HEADING_MARK}{tag.name[1]}{title}\n")
    text, headings = _extract_marked_headings(normalize_text(soup.get_text()))
    first_h1 = next((h.title for h in headings if h.level == 1), "")
    return [text], (html_title or first_h1), headings


def _extract_marked_headings(marked: str) -> tuple[str, list[Heading]]:
    lines_out: list[str] = []
    headings: list[Heading] = []
    offset = 0
    for line in marked.split("\n"):
        if line.startswith(_HEADING_MARK):
            level, title = int(line[1]), line[2:].strip()
            if not title:
                continue
            headings.append(Heading(offset, offset + len(title), level, title))
            line = title
        lines_out.append(line)
        offset += len(line) + 1
    return "\n".join(lines_out), headings
