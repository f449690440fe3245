"""Tune the embedding model on the manifest corpora before a fresh index is built (HYPA_TUNE_EMBEDDINGS).

The user's own files are tuned on too when they are what builds the fresh index (`hypa ingest` as the
first command) or are named (`hypa index tune --include`): the pairs need no questions, only a
document's own headings and lists, so any regulation can be tuned for.
Pairs come from the regulations' own structure (core/tuning.py) and, in a source checkout, from our
training questions (tests/data/user_questions/*_train*.jsonl, never ../shared); the model is saved to
data/models/tuned-minilm and from then on embeds everything (bot.wiring.embedding_model). Only a fresh
index is tuned for: vectors of different models cannot be searched together, so an index built before
keeps the model it was built with until it is rebuilt.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from bot.cli_common import first_line
from bot.corpus import CorpusError, fetch_corpus, load_manifest
from bot.settings import Settings
from core.errors import DocumentError
from core.ingest.chunker import chunk_document
from core.ingest.loaders import load_document
from core.ingestion import check_file_size, doc_id_for, select_files
from core.tuning import tuning_pairs
from core.types import Chunk
from storage.embedder import Embedder
from storage.embedder_tuning import TuningRecord, is_tuned_model, tune_embedding_model

TRAINING_QUESTIONS = Path(__file__).resolve().parent.parent / "tests" / "data" / "user_questions"


@dataclass(frozen=True)
class TuningOutcome:
    record: TuningRecord
    corpora: tuple[str, ...]  # the corpora and the user's files tuned on
    skipped: tuple[str, ...]  # "name: why" for corpora and files that could not be read
    questions: int


def should_tune(settings: Settings, index_has_collections: Callable[[], bool]) -> bool:
    """A fresh index with the default model and tuning on, and no tuned model yet. The index is asked
    last, only when the settings allow tuning (a Weaviate that is down is then ingest's to report)."""
    return (
        settings.tune_embeddings
        and not settings.embedding_model
        and not is_tuned_model(settings.tuned_model_dir)
        and not index_has_collections()
    )


def corpus_chunks(
    settings: Settings, count_tokens: Callable[[str], int], download: bool = True
) -> tuple[list[Chunk], list[str], list[str]]:
    """The chunks of every manifest corpus that can be fetched (chunked as ingest chunks them; without
    `download`, only those already on disk or in the mirror), the corpora read, and "name: why" for
    those that could not be."""
    chunks: list[Chunk] = []
    read: list[str] = []
    skipped: list[str] = []
    for name in load_manifest().corpora:
        try:
            files = fetch_corpus(name, settings.corpus_dir, settings.corpus_mirror, allow_download=download)
            for f in files:
                chunks.extend(_file_chunks(f.path, name, settings, count_tokens))
            read.append(name)
        except (CorpusError, DocumentError, OSError, ValueError) as exc:
            skipped.append(f"{name}: {first_line(exc)}")
    return chunks, read, skipped


def training_questions(directory: Path = TRAINING_QUESTIONS) -> list[tuple[str, list[str]]]:
    """(question, evidence spans) of our training questions, when this is a source checkout."""
    from core.ranking_train import read_training_questions

    files = sorted(directory.glob("*_train*.jsonl")) if directory.is_dir() else []
    return [(q.question, list(q.evidence)) for q in read_training_questions(files)] if files else []


def document_chunks(
    paths: Sequence[Path], settings: Settings, count_tokens: Callable[[str], int]
) -> tuple[list[Chunk], list[str], list[str]]:
    """The chunks of the user's own files (directories searched as `hypa ingest` searches them), the
    files read, and "file: why" for those that could not be (a corrupt PDF is not tuned on; ingest
    then says what is wrong with it)."""
    chunks: list[Chunk] = []
    read: list[str] = []
    skipped: list[str] = []
    for path in select_files(paths).files:
        try:
            check_file_size(path, int(settings.ingest_max_file_mb * 1_000_000))  # as ingest will
            chunks.extend(_file_chunks(path, "tuning", settings, count_tokens))
            read.append(path.name)
        except (DocumentError, OSError, ValueError) as exc:
            skipped.append(f"{path.name}: {first_line(exc)}")
    return chunks, read, skipped


def _file_chunks(path: Path, collection: str, settings: Settings, count_tokens: Callable[[str], int]) -> list[Chunk]:
    """A file's chunks, chunked as ingest chunks it."""
    return chunk_document(
        load_document(path), collection=collection, doc_id=doc_id_for(path), chunk_tokens=settings.chunk_tokens,
        chunk_overlap=settings.chunk_overlap, count_tokens=count_tokens,
    )


def tune(
    settings: Settings,
    progress: Callable[[int, int], None] | None = None,
    documents: Sequence[Path] = (),
    download: bool = True,
) -> TuningOutcome:
    """Tune the package's model on the corpora, the user's own `documents` (and our training
    questions) into settings.tuned_model_dir."""
    base = Embedder(None)
    chunks, read, skipped = corpus_chunks(settings, base.count_tokens, download)
    own, own_read, own_skipped = document_chunks(documents, settings, base.count_tokens)
    chunks, read, skipped = chunks + own, read + own_read, skipped + own_skipped
    if not chunks:
        raise CorpusError("no corpus could be read to tune the embedding model on: " + "; ".join(skipped))
    questions = training_questions()
    pairs = tuning_pairs(chunks, questions)
    note = f"corpora: {', '.join(read)}; {len(questions)} training questions"
    record = tune_embedding_model(base.model_dir, pairs, settings.tuned_model_dir, note=note, progress=progress)
    return TuningOutcome(record, tuple(read), tuple(skipped), len(questions))
