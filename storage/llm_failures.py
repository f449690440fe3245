"""Where failed LLM calls are written down, so no failure goes unnoticed.

`core.llm.client.FailureRecorder` is the interface (a SQL-backed store can implement it later);
`JsonlFailureRecorder` appends one JSON object per failure to a file:

    {"time": "2026-11-23T03:10:00.123+00:00", "question_sha256": "9f86d081884c7d65", "question_chars": 57,
     "error_class": "LLMUnavailable", "message": "...", "reason": "overloaded, HTTP 529", "status": 529}

The question's text (and any excerpt of the model's reply an error carries) is written only with
`keep_text=True`, i.e. HYPA_LOG_MESSAGE_TEXT=true, like the logs; otherwise its length and the first
16 hex digits of its SHA-256, enough to see one question failing again and again, or to find it in
the conversation store (which keeps questions by design).

Writes are serialised by a lock and flushed per line; a record never raises into the caller's path
more than the OS does (callers such as core.llm.client.FallbackGenerator also guard it).
"""
from __future__ import annotations

import hashlib
import json
import threading
from datetime import datetime, timezone
from pathlib import Path
from typing import Any


def question_fields(question: str, keep_text: bool) -> dict[str, Any]:
    """{"question": text} with keep_text, else its SHA-256 prefix and length."""
    if keep_text:
        return {"question": question}
    digest = hashlib.sha256(question.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return {"question_sha256": digest, "question_chars": len(question)}


def failure_record(question: str, error: BaseException, *, keep_text: bool = False, **context: Any) -> dict[str, Any]:
    row: dict[str, Any] = {
        "time": datetime.now(timezone.utc).isoformat(timespec="milliseconds"),
        **question_fields(question, keep_text),
        "error_class": type(error).__name__,
        "message": str(error),
    }
    excerpt = getattr(error, "excerpt", "")
    if keep_text and isinstance(excerpt, str) and excerpt:
        row["excerpt"] = excerpt
    reason = getattr(error, "reason", None)
    if isinstance(reason, str):
        row["reason"] = reason
    status = getattr(error, "status", None)
    if isinstance(status, int):
        row["status"] = status
    for key, value in context.items():
        row.setdefault(key, value)
    return row


class JsonlFailureRecorder:
    """Appends one JSON line per failure to `path` (parent directories are created); the question's
    text only with `keep_text` (HYPA_LOG_MESSAGE_TEXT)."""

    def __init__(self, path: Path | str, *, keep_text: bool = False) -> None:
        self.path = Path(path)
        self.keep_text = keep_text
        self._lock = threading.Lock()

    def record(self, question: str, error: BaseException, **context: Any) -> None:
        row = failure_record(question, error, keep_text=self.keep_text, **context)
        line = json.dumps(row, ensure_ascii=False, default=str)
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a", encoding="utf-8") as f:
                f.write(line + "\n")
                f.flush()

    def read(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        with self.path.open(encoding="utf-8") as f:
            return [json.loads(line) for line in f if line.strip()]


class MemoryFailureRecorder:
    """Keeps records in a list, with the question's text (tests, or a front end that shows them)."""

    def __init__(self, *, keep_text: bool = True) -> None:
        self.records: list[dict[str, Any]] = []
        self.keep_text = keep_text
        self._lock = threading.Lock()

    def record(self, question: str, error: BaseException, **context: Any) -> None:
        row = failure_record(question, error, keep_text=self.keep_text, **context)
        with self._lock:
            self.records.append(row)
