"""`hypa ingest`: load files, chunk them along their legal structure, and (re)place them in the index.

Each file is one document. The index records where it came from (its absolute path) and when, so a
document is identified by its file, never by a name another file could share:

* Re-ingesting the same file updates its document: unchanged content (same sha256) is skipped, a
  changed file replaces all of its old chunks (and is reported as replaced).
* A new file gets the id of its name (`rules.md` -> `rules`, the ids the manifest corpora have always
  had). If another file already holds that id, the new one takes its folder names as well
  (`b/rules.md` -> `b-rules`) and the outcome says so: nothing is replaced behind the user's back.
* The holder of an id counts as this same file when its content is identical (a copy), when its
  recorded file no longer exists (the file was moved), or when no file was recorded (documents
  ingested by hypa versions before sources were recorded: they were identified by name alone).
* `doc_id=` (`hypa ingest FILE --as ID`) puts a file under an explicit id, replacing what holds it.
* `source_url=` (`hypa ingest FILE --source-url URL`) records where the document's citations link to
  (a URL or a pattern, core/links.py) with its record; given for an unchanged file, only the record
  changes. Not given, a document keeps the link it has.

A file that cannot be read, or is over the size limit, is reported and the index is left exactly as
it was.
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Literal, Protocol, Sequence

from core.errors import DocumentError, IndexUnavailable, IndexWriteError, InvalidDocumentId, LinkPatternError
from core.index import ChunkIndex, DocumentInfo
from core.ingest.chunker import CHUNKING_VERSION, chunk_document
from core.ingest.loaders import load_document
from core.links import check_pattern
from core.types import Chunk

SUPPORTED_SUFFIXES = (".pdf", ".md", ".markdown", ".txt", ".html", ".htm")
_DOC_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")

Status = Literal["added", "replaced", "unchanged", "failed"]


@dataclass(frozen=True)
class IngestOutcome:
    path: Path
    doc_id: str
    status: Status
    chunks: int = 0
    error: str = ""
    note: str = ""  # how the id was chosen, or what was replaced, when that is not obvious


class IngestProgress(Protocol):
    """What `hypa ingest` shows while one file is worked on (Components also reports embedding counts)."""

    def stage(self, name: str, total: int | None = None) -> None: ...

    def advance(self, n: int) -> None: ...


def doc_id_for(path: Path) -> str:
    """The id a file's name gives it (`LL144_rules.pdf` -> `ll144-rules`)."""
    return re.sub(r"[^a-z0-9]+", "-", path.stem.lower()).strip("-") or "document"


def source_of(path: Path) -> str:
    """What the index records as a document's source: the file's absolute path."""
    return str(Path(path).resolve())


# --- choosing files --------------------------------------------------------------------------------


@dataclass(frozen=True)
class FileSelection:
    files: list[Path]  # to ingest: as given, and the supported files inside directories given
    skipped: list[Path] = field(default_factory=list)  # inside directories, of a type hypa cannot read
    hidden: int = 0  # hidden files and files in hidden folders (.git, .DS_Store, ...), not looked at


def select_files(paths: Iterable[Path]) -> FileSelection:
    """Files as given (whatever their type: reading one says what is wrong with it), and the supported
    files inside any directory given (sorted, recursive); the others found there are listed as skipped."""
    files: list[Path] = []
    skipped: list[Path] = []
    hidden = 0
    for p in paths:
        if not p.is_dir():
            files.append(p)
            continue
        for f in sorted(p.rglob("*")):
            if not f.is_file():
                continue
            if any(part.startswith(".") for part in f.relative_to(p).parts):
                hidden += 1
            elif f.suffix.lower() in SUPPORTED_SUFFIXES:
                files.append(f)
            else:
                skipped.append(f)
    return FileSelection(files, skipped, hidden)


# --- which document a file is ----------------------------------------------------------------------


@dataclass(frozen=True)
class DocumentKey:
    doc_id: str
    note: str = ""  # shown with the outcome: why the id is not the file's plain name, or what it replaced
    note_if_replaced: str = ""  # shown only when the content changed (the id was taken on trust)


def document_key(
    path: Path, content_hash: str, existing: Sequence[DocumentInfo], *, file_exists: Callable[[str], bool] | None = None
) -> DocumentKey:
    """The id under which `path` (whose bytes hash to `content_hash`) goes into a collection that holds
    `existing`; see the module docstring for the rules."""
    exists = file_exists or (lambda source: Path(source).exists())
    source = source_of(path)
    for info in existing:
        if info.source == source:
            return DocumentKey(info.doc_id)
    by_id = {info.doc_id: info for info in existing}
    base = doc_id_for(path)
    first_holder = by_id.get(base)
    for candidate in _candidate_ids(path):
        holder = by_id.get(candidate)
        if holder is None:
            if candidate == base:
                return DocumentKey(candidate)
            assert first_holder is not None  # the base id was taken, or it would have been returned
            return DocumentKey(candidate, f"'{base}' is another file: {first_holder.source}")
        if not holder.source:
            return DocumentKey(candidate, note_if_replaced=(
                f"'{candidate}' was ingested by an earlier hypa that did not record its file; if that was "
                "another file, ingest it again and it will be kept beside this one"
            ))
        if holder.content_hash == content_hash:
            return DocumentKey(candidate, f"same content as {holder.source}")
        if not exists(holder.source):
            return DocumentKey(candidate, f"its file moved from {holder.source}")
    raise AssertionError("unreachable: _candidate_ids never ends")  # pragma: no cover


def _candidate_ids(path: Path) -> Iterable[str]:
    """`rules`, then with the folder names above it (`b-rules`, `x-b-rules`, ...), then numbered."""
    path = Path(path).resolve()
    base = doc_id_for(path)
    yield base
    prefix = base
    for folder in path.parents:
        if not folder.name:
            break
        prefix = doc_id_for(Path(folder.name)) + "-" + prefix
        yield prefix
    n = 2
    while True:
        yield f"{prefix}-{n}"
        n += 1


def check_doc_id(doc_id: str) -> str:
    if not _DOC_ID.match(doc_id):
        raise InvalidDocumentId(f"document id {doc_id!r}: use letters, digits, '_', '-' and '.' (at most 128)")
    return doc_id


def explicit_key(doc_id: str, path: Path, existing: Sequence[DocumentInfo]) -> DocumentKey:
    """`--as ID`: the file goes under `doc_id`, whatever holds it (InvalidDocumentId for an unusable id)."""
    check_doc_id(doc_id)
    holder = next((info for info in existing if info.doc_id == doc_id), None)
    if holder is not None and holder.source and holder.source != source_of(path):
        return DocumentKey(doc_id, f"'{doc_id}' was {holder.source}")
    return DocumentKey(doc_id)


# --- ingesting one file ----------------------------------------------------------------------------


def file_hash(path: Path) -> str:
    """sha256 of the file's bytes (LoadedDocument.content_hash), read in blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def stored_hash(content_hash: str) -> str:
    """What the index keeps as a document's version: the file's sha256 and the chunking version, so
    an unchanged file is re-chunked once when the chunker changes, and never otherwise."""
    return f"{content_hash}:c{CHUNKING_VERSION}"


def ingest_file(
    path: Path,
    *,
    collection: str,
    index: ChunkIndex,
    chunk_tokens: int,
    chunk_overlap: int,
    count_tokens: Callable[[str], int],
    after_replace: Callable[[list[Chunk]], None] | None = None,
    doc_id: str | None = None,
    max_file_bytes: int | None = None,
    progress: IngestProgress | None = None,
    source_url: str | None = None,
) -> IngestOutcome:
    """`after_replace(chunks)` runs once the document is in the index (e.g. to embed its sentences).
    `doc_id`: an explicit id (see explicit_key); otherwise document_key chooses it. `source_url`: where
    its citations link to (checked by core.links.check_pattern; "" = no link, None = keep the
    document's)."""
    stage = progress.stage if progress is not None else (lambda name, total=None: None)
    shown_id = doc_id or doc_id_for(path)
    try:
        check_file_size(path, max_file_bytes)
        stage("reading")
        # The version the index keeps: the file's sha256 and the chunking version (stored_hash).
        content_hash = stored_hash(file_hash(path)) if path.is_file() else ""
        existing = index.document_info(collection)
        if doc_id is not None:
            key = explicit_key(doc_id, path, existing)
        else:
            key = document_key(path, content_hash, existing)
        shown_id = key.doc_id
        holder = next((info for info in existing if info.doc_id == key.doc_id), None)
        previous = holder.content_hash if holder is not None else None
        kept_url = holder.source_url if holder is not None else ""
        link = kept_url if source_url is None else check_pattern(source_url) if source_url else ""
        if previous is not None and previous == content_hash:
            if after_replace is not None:  # idempotent: fills in what an older version may lack
                after_replace([c for c in index.chunks(collection) if c.doc_id == key.doc_id])
            note = key.note
            if link != kept_url:  # only the link changed: the record, not the chunks
                index.set_source_url(collection, key.doc_id, link)
                note = "; ".join(n for n in (note, f"links to {link}" if link else "link removed") if n)
            return IngestOutcome(path, key.doc_id, "unchanged", note=note)
        doc = load_document(path)
        stage("chunking")
        chunks = chunk_document(
            doc,
            collection=collection,
            doc_id=key.doc_id,
            chunk_tokens=chunk_tokens,
            chunk_overlap=chunk_overlap,
            count_tokens=count_tokens,
        )
        if not chunks:
            raise DocumentError(f"{path.name}: no text could be chunked")
        stage("embedding chunks", len(chunks))
        index.replace_document(collection, key.doc_id, content_hash, chunks, source=source_of(path), source_url=link)
        if after_replace is not None:
            after_replace(chunks)
    except (DocumentError, InvalidDocumentId, LinkPatternError) as exc:
        return IngestOutcome(path, shown_id, "failed", error=str(exc))
    except (IndexUnavailable, IndexWriteError) as exc:  # the backend, not the file: say so, keep going
        return IngestOutcome(path, shown_id, "failed", error=f"index backend: {exc}")
    linked = f"links to {link}" if source_url else ""  # said when given, not for a link kept
    if previous is None:
        return IngestOutcome(path, key.doc_id, "added", chunks=len(chunks), note="; ".join(n for n in (key.note, linked) if n))
    note = "; ".join(n for n in (key.note, key.note_if_replaced, linked) if n)
    return IngestOutcome(path, key.doc_id, "replaced", chunks=len(chunks), note=note)


def check_file_size(path: Path, max_file_bytes: int | None) -> None:
    """DocumentError when the file is over the ingest limit (HYPA_INGEST_MAX_FILE_MB)."""
    if max_file_bytes is None or not path.is_file():
        return  # a missing file is load_document's to report
    size = path.stat().st_size
    if size > max_file_bytes:
        raise DocumentError(
            f"{path.name} is {size / 1e6:.1f} MB, over the {max_file_bytes / 1e6:g} MB limit "
            "(HYPA_INGEST_MAX_FILE_MB): split it into smaller files, or raise the limit"
        )
