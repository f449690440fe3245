"""`hypa ingest`: load files, chunk them along their legal structure, and (re)place them in the index.

Each file is one document; its id is the file name stem. An unchanged file (same sha256) is skipped;
a changed one replaces all of its old chunks. A file that cannot be read is reported and the index is
left exactly as it was.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Literal

from core.ingest.chunker import CHUNKING_VERSION, chunk_document
from core.ingest.loaders import DocumentError, load_document
from core.types import Chunk
from storage.index import ChunkIndex, IndexUnavailable, IndexWriteError

SUPPORTED_SUFFIXES = (".pdf", ".md", ".markdown", ".txt", ".html", ".htm")

Status = Literal["added", "replaced", "unchanged", "failed"]


@dataclass(frozen=True)
class IngestOutcome:
    path: Path
    doc_id: str
    status: Status
    chunks: int = 0
    error: str = ""


def doc_id_for(path: Path) -> str:
    return re.sub(r"[^a-z0-9]+", "-", path.stem.lower()).strip("-") or "document"


def expand_paths(paths: Iterable[Path]) -> list[Path]:
    """Files as given, and the supported files inside any directory given (sorted, recursive)."""
    out: list[Path] = []
    for p in paths:
        if p.is_dir():
            out.extend(sorted(f for f in p.rglob("*") if f.suffix.lower() in SUPPORTED_SUFFIXES))
        else:
            out.append(p)
    return out


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
) -> IngestOutcome:
    """`after_replace(chunks)` runs once the document is in the index (e.g. to embed its sentences)."""
    doc_id = doc_id_for(path)
    try:
        doc = load_document(path)
        stored_as = stored_hash(doc.content_hash)
        previous = index.document_hash(collection, doc_id)
        if previous == stored_as:
            if after_replace is not None:  # idempotent: fills in what an older version may lack
                after_replace([c for c in index.chunks(collection) if c.doc_id == doc_id])
            return IngestOutcome(path, doc_id, "unchanged")
        chunks = chunk_document(
            doc,
            collection=collection,
            doc_id=doc_id,
            chunk_tokens=chunk_tokens,
            chunk_overlap=chunk_overlap,
            count_tokens=count_tokens,
        )
        if not chunks:
            raise DocumentError(f"{path.name}: no text could be chunked")
        index.replace_document(collection, doc_id, stored_as, chunks)
        if after_replace is not None:
            after_replace(chunks)
    except DocumentError as exc:
        return IngestOutcome(path, doc_id, "failed", error=str(exc))
    except (IndexUnavailable, IndexWriteError) as exc:  # the backend, not the file: say so, keep going
        return IngestOutcome(path, doc_id, "failed", error=f"index backend: {exc}")
    return IngestOutcome(path, doc_id, "replaced" if previous else "added", chunks=len(chunks))
