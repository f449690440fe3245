"""Split a question set into a part to study and a part only to measure.

Tuning on the questions one then reports is how a gain shows only on what was tuned on. Each set is
split once, deterministically (a hash of the group id, so the split never depends on the file's order
and the same question always lands on the same side), and the two parts are reported side by side.

A follow-up stays with the question it follows: its group is the row whose question is the thread's
first user turn, when that row is in the set (otherwise it is its own group).
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from core.eval.report import read_jsonl

PARTS = ("study", "measure")


@dataclass(frozen=True)
class SplitSummary:
    study: Path
    measure: Path
    rows: dict[str, int]  # part -> rows written


def part_of(group: str, salt: str = "") -> str:
    """'study' or 'measure' for a group id; stable across runs, machines and file orders."""
    digest = hashlib.sha256(f"{salt}{group}".encode()).digest()
    return PARTS[digest[0] % 2]


def group_ids(rows: list[dict]) -> list[str]:
    """Each row's group: a follow-up joins the row that asked its thread's first question."""
    by_question = {str(r.get("question", "")).strip(): str(r["id"]) for r in rows}
    groups = []
    for row in rows:
        first = next(
            (t.get("content", "") for t in row.get("conversation_history") or [] if t.get("role") == "user"),
            "",
        )
        groups.append(by_question.get(str(first).strip(), str(row["id"])))
    return groups


def split_dataset(path: Path, out_dir: Path, salt: str = "") -> SplitSummary:
    """Write `<stem>.study.jsonl` and `<stem>.measure.jsonl` (rows unchanged, in file order)."""
    rows = [row for _, row in read_jsonl(path, "dataset")]
    out_dir.mkdir(parents=True, exist_ok=True)
    targets = {part: out_dir / f"{path.stem}.{part}.jsonl" for part in PARTS}
    counts = dict.fromkeys(PARTS, 0)
    handles = {part: target.open("w", encoding="utf-8") for part, target in targets.items()}
    try:
        for row, group in zip(rows, group_ids(rows)):
            part = part_of(group, salt)
            handles[part].write(json.dumps(row, ensure_ascii=False) + "\n")
            counts[part] += 1
    finally:
        for handle in handles.values():
            handle.close()
    return SplitSummary(study=targets["study"], measure=targets["measure"], rows=counts)
