"""Follow-ups in a thread vs the same questions asked standalone: context recall per retrieval config.

    HYPA_DATA_DIR=... .venv/bin/python bench/bench_conversational.py [--dataset FILE] [--config NAME ...]

Issue 3's target: conversational questions are answered as well as their standalone equivalents
(context recall within 0.03). The dataset has no standalone versions, so this script makes one per
conversational row without any judgement: the user's earlier turns and the follow-up joined into
one message, with no history ("I would like to know the requirements for using an AEDT in the city.
What are they?"). Both variants go through the same pipeline the bots use and are scored against the
same reference answer. The derived files go to the git-ignored data directory, never into the repo.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from bot.cli_common import load_settings  # sets the offline environment first  # isort: skip
from bot.wiring import Components
from core.eval import build_report, run_eval

DEV = Path(__file__).resolve().parents[2] / "shared" / "data" / "eval" / "ll144_dev.jsonl"
CONFIGS = ("default", "pa-2class", "pa-3class", "pa-2class-budget", "hypa-2class")


def standalone(row: dict) -> dict:
    """The follow-up as one message: earlier user turns, then the question; no history."""
    user_turns = [t["content"].strip() for t in row.get("conversation_history") or [] if t.get("role") == "user"]
    return {**row, "question": " ".join([*user_turns, row["question"].strip()]), "conversation_history": []}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", type=Path, default=DEV)
    parser.add_argument("--collection", default="ll144")
    parser.add_argument("--config", action="append", help=f"Retrieval config (repeatable; default: {', '.join(CONFIGS)}).")
    args = parser.parse_args()
    settings = load_settings()
    out_dir = settings.data_dir / "results" / "conversational"
    out_dir.mkdir(parents=True, exist_ok=True)

    rows = [json.loads(line) for line in args.dataset.open(encoding="utf-8") if line.strip()]
    followups = [r for r in rows if (r.get("metadata") or {}).get("question_type") == "conversational"]
    if not followups:
        raise SystemExit(f"no conversational rows in {args.dataset}")
    variants = {"in thread": followups, "standalone": [standalone(r) for r in followups]}
    paths = {}
    for name, variant in variants.items():
        path = out_dir / f"{name.replace(' ', '_')}.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in variant), encoding="utf-8")
        paths[name] = path

    print(f"{len(followups)} conversational questions from {args.dataset.name}, collection {args.collection}\n")
    print("| config | recall in thread | recall standalone | gap | tokens in thread | tokens standalone |")
    print("| --- | --- | --- | --- | --- | --- |")
    for config in args.config or CONFIGS:
        overrides = {} if config == "default" else {"config": config}
        components = Components(settings, overrides=overrides)
        components.embedder.embed_queries(["warm up"])
        stats = {}
        for name, path in paths.items():
            results = out_dir / f"{config}-{path.stem}-results.jsonl"
            run_eval(path, results, components.pipeline, args.collection, progress=False)
            stats[name] = build_report(results, path, None, embed=None).overall
        thread, alone = stats["in thread"], stats["standalone"]
        gap = alone.context_recall - thread.context_recall
        print(
            f"| {config} | {thread.context_recall:.3f} | {alone.context_recall:.3f} | {gap:+.3f} "
            f"| {thread.context_tokens:,.0f} | {alone.context_tokens:,.0f} |"
        )


if __name__ == "__main__":
    main()
