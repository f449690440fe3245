"""`hypa eval run`: answer every question of a JSONL dataset and write one result row per question.

Isolation guarantee: of each dataset row only ``id``, ``question`` and the optional
``conversation_history`` are read. The row is parsed, those three fields are copied into an
:class:`EvalItem`, and the parsed row is dropped before anything reaches the answerer, so gold
fields (``reference_answer``, ``reference_context``, ``metadata`` ...) can never leak into the
system under test or into the written results. ``tests/test_eval.py`` proves this with poisoned rows.
"""

from __future__ import annotations

import json
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Iterator, Protocol, Sequence

from core.errors import DatasetError
from core.types import PipelineResult, Turn

_ROLES = ("user", "assistant")


class Answerer(Protocol):
    """What `run_eval` needs from the system under test (``core.pipeline.AnswerPipeline`` fits)."""

    def answer(
        self, question: str, history: Sequence[Turn] = (), *, collection: str | None = None
    ) -> PipelineResult: ...


@dataclass(frozen=True)
class EvalItem:
    """The only parts of a dataset row the system under test may see."""

    id: str | int
    question: str
    history: tuple[Turn, ...] = ()


@dataclass(frozen=True)
class RunSummary:
    dataset: Path
    out_path: Path
    rows: int  # rows answered (or attempted)
    errors: int  # rows whose answerer raised; written with an "error" field
    refused: int  # rows answered with refused=True
    seconds: float  # wall-clock time of the whole run

    def to_dict(self) -> dict:
        return {
            "dataset": str(self.dataset),
            "out_path": str(self.out_path),
            "rows": self.rows,
            "errors": self.errors,
            "refused": self.refused,
            "seconds": round(self.seconds, 3),
        }


def _parse_history(raw: object, where: str) -> tuple[Turn, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise DatasetError(f"{where}: conversation_history must be a list of {{role, content}} objects")
    turns = []
    for i, t in enumerate(raw):
        if not isinstance(t, dict):
            raise DatasetError(f"{where}: conversation_history[{i}] is not an object")
        role, content = t.get("role"), t.get("content")
        if role not in _ROLES:
            raise DatasetError(
                f"{where}: conversation_history[{i}].role must be 'user' or 'assistant', got {role!r}"
            )
        if not isinstance(content, str):
            raise DatasetError(f"{where}: conversation_history[{i}].content must be a string")
        turns.append(Turn(role=role, content=content))
    return tuple(turns)


def _item_from_line(line: str, where: str) -> EvalItem:
    try:
        row = json.loads(line)
    except json.JSONDecodeError as e:
        raise DatasetError(f"{where}: invalid JSON ({e.msg} at column {e.colno})") from None
    if not isinstance(row, dict):
        raise DatasetError(f"{where}: expected a JSON object, got {type(row).__name__}")
    # Only these three fields are ever read from a dataset row.
    rid = row.get("id")
    question = row.get("question")
    history_raw = row.get("conversation_history")
    del row
    if not isinstance(rid, (str, int)) or isinstance(rid, bool) or rid == "":
        raise DatasetError(f"{where}: missing or invalid 'id'")
    if not isinstance(question, str):
        raise DatasetError(f"{where}: missing or non-string 'question'")
    return EvalItem(id=rid, question=question, history=_parse_history(history_raw, where))


def read_items(dataset_path: str | Path) -> list[EvalItem]:
    """Parse a JSONL dataset into :class:`EvalItem`s (blank lines are skipped).

    The whole file is validated before any question is answered, so a bad line fails fast.
    Raises :class:`DatasetError` naming ``path:line`` for invalid JSON, a non-object row, a missing
    ``id``/``question``, a malformed ``conversation_history`` or a duplicate ``id``.
    """
    path = Path(dataset_path)
    items: list[EvalItem] = []
    seen: dict[str | int, int] = {}
    with path.open(encoding="utf-8") as f:
        for lineno, line in enumerate(f, start=1):
            if not line.strip():
                continue
            where = f"{path}:{lineno}"
            item = _item_from_line(line, where)
            if item.id in seen:
                raise DatasetError(f"{where}: duplicate id {item.id!r} (first on line {seen[item.id]})")
            seen[item.id] = lineno
            items.append(item)
    return items


def _error_row(item: EvalItem, exc: BaseException, elapsed_ms: float) -> dict:
    tb = traceback.extract_tb(exc.__traceback__)
    where = f" ({tb[-1].filename}:{tb[-1].lineno})" if tb else ""
    return {
        "id": item.id,
        "question": item.question,
        "error": f"{type(exc).__name__}: {exc}{where}",
        "timings_ms": {"total": round(elapsed_ms, 3)},
    }


def _progress_iter(items: Sequence[EvalItem], enabled: bool, counters: dict) -> Iterator[EvalItem]:
    if not enabled:
        yield from items
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    with Progress(
        TextColumn("[bold]eval[/bold]"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("refused {task.fields[refused]}  errors {task.fields[errors]}"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=Console(stderr=True),
        transient=False,
    ) as bar:
        task = bar.add_task("eval", total=len(items), refused=0, errors=0)
        for item in items:
            yield item
            bar.update(task, advance=1, refused=counters["refused"], errors=counters["errors"])


def run_eval(
    dataset_path: str | Path,
    out_path: str | Path,
    answerer: Answerer,
    collection: str | None,
    progress: bool = True,
) -> RunSummary:
    """Answer every dataset question with `answerer` and write ``out_path`` as JSONL.

    Each output line is ``{"id": <dataset id>, **PipelineResult.to_record()}``. If the answerer
    raises on a row, that row is written as ``{"id", "question", "error", "timings_ms": {"total"}}``
    and the run continues (``KeyboardInterrupt`` still stops it; rows written so far are kept, the
    file is flushed after every row). The dataset is fully validated first (see :func:`read_items`).
    """
    dataset = Path(dataset_path)
    out = Path(out_path)
    items = read_items(dataset)
    out.parent.mkdir(parents=True, exist_ok=True)
    counters = {"refused": 0, "errors": 0}
    n = 0
    start = time.perf_counter()
    with out.open("w", encoding="utf-8") as f:
        for item in _progress_iter(items, progress, counters):
            n += 1
            t0 = time.perf_counter()
            try:
                result = answerer.answer(item.question, item.history, collection=collection)
                row = {"id": item.id, **result.to_record()}
                if row.get("refused"):
                    counters["refused"] += 1
            except Exception as exc:  # noqa: BLE001 - one bad row must not stop the run
                counters["errors"] += 1
                row = _error_row(item, exc, (time.perf_counter() - t0) * 1000.0)
            _write_row(f, row)
    return RunSummary(
        dataset=dataset,
        out_path=out,
        rows=n,
        errors=counters["errors"],
        refused=counters["refused"],
        seconds=time.perf_counter() - start,
    )


def _write_row(f: IO[str], row: dict) -> None:
    f.write(json.dumps(row, ensure_ascii=False) + "\n")
    f.flush()
