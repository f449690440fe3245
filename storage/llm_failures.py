"""Where failed LLM calls are written down, with the question, so no question is lost silently.

`FailureRecorder` is the interface (a SQL-backed store can implement it later); `JsonlFailureRecorder`
appends one JSON object per failure to a file:

    {"time": "2026-11-23T03:10:00.123+00:00", "question": "...", "error_class": "LLMUnavailable",
     "message": "...", "reason": "overloaded, HTTP 529", "status": 529}

Writes are serialised by a lock and flushed per line; a record never raises into the caller's path
more than the OS does (callers such as core.llm.client.FallbackGenerator also guard it).
"""
from __future__ import annotations

import json
import threading
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class FailureRecorder(Protocol):
    def record(self, question: str, error: BaseException, **context: Any) -> None: ...


def failure_record(question: str, error: BaseException, **context: Any) -> dict[str, Any]:
    row: dict[str, Any] = {
        "time": datetime.now(timezone.utc).isoformat(timespec="milliseconds"),
        "question": question,
        "error_class": type(error).__name__,
        "message": str(error),
    }
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
    """Appends one JSON line per failure to `path` (parent directories are created)."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()

    def record(self, question: str, error: BaseException, **context: Any) -> None:
        line = json.dumps(failure_record(question, error, **context), ensure_ascii=False, default=str)
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
    """Keeps records in a list (tests, or a front end that shows them)."""

    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def record(self, question: str, error: BaseException, **context: Any) -> None:
        row = failure_record(question, error, **context)
        with self._lock:
            self.records.append(row)
