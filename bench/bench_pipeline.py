"""End-to-end benchmark of the embedded default: ingest, index load, per-question latency, concurrency, memory.

    .venv/bin/python bench/bench_pipeline.py [--corpus ll144] [--skip-eu] [--questions DATASET.jsonl]

Ingest is measured into a fresh temporary data directory (so nothing is cached); questions come from
the dev set's `question` field only. Prints a table; paste it into docs/RESULTS.md with the date.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bot.corpus import fetch_corpus  # noqa: E402
from bot.settings import Settings  # noqa: E402
from bot.wiring import Components  # noqa: E402
from core.eval.metrics import percentile  # noqa: E402


def ingest(components: Components, corpus: str) -> float:
    s = components.settings
    files = fetch_corpus(corpus, s.corpus_dir, s.corpus_mirror, allow_download=False)
    components.embedder.embed_queries(["warm up"])  # model load is reported separately
    t = time.perf_counter()
    for f in files:
        outcome = components.ingest(f.path, corpus)
        assert outcome.status != "failed", outcome.error
    return time.perf_counter() - t


def cold_start_seconds(data_dir: Path, question: str) -> float:
    """A new process: import, load index and model, answer one question."""
    env = dict(os.environ, HYPA_DATA_DIR=str(data_dir))
    t = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "bot", "ask", question, "--collection", "ll144", "--json"],
        cwd=ROOT, env=env, check=True, capture_output=True,
    )
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--questions", type=Path, default=ROOT.parent / "shared/data/eval/ll144_dev.jsonl")
    ap.add_argument("--skip-eu", action="store_true", help="skip the 458-page EU AI Act ingest")
    ap.add_argument("--concurrency", type=int, default=8)
    args = ap.parse_args()

    questions = [json.loads(line)["question"] for line in args.questions.read_text().splitlines() if line.strip()]
    rows: list[tuple[str, str]] = []
    with tempfile.TemporaryDirectory() as tmp:
        data_dir = Path(tmp)
        settings = Settings(data_dir=data_dir)
        components = Components(settings)
        t = time.perf_counter()
        components.embedder.embed_queries(["load"])
        rows.append(("embedding model load", f"{time.perf_counter() - t:.2f} s"))
        rows.append(("ingest LL144 (2 PDFs)", f"{ingest(components, 'll144'):.2f} s"))
        if not args.skip_eu:
            rows.append(("ingest EU AI Act (458 pages)", f"{ingest(components, 'eu-ai-act'):.2f} s"))

        fresh = Components(settings)
        fresh.embedder.embed_queries(["load"])
        t = time.perf_counter()
        fresh.index.chunks("ll144")
        fresh.term_stats("ll144")
        rows.append(("index load (LL144, from disk)", f"{(time.perf_counter() - t) * 1000:.1f} ms"))
        if not args.skip_eu:
            t = time.perf_counter()
            fresh.index.chunks("eu-ai-act")
            fresh.term_stats("eu-ai-act")
            rows.append(("index load (EU AI Act, from disk)", f"{(time.perf_counter() - t) * 1000:.1f} ms"))

        pipeline = fresh.pipeline
        pipeline.answer(questions[0], collection="ll144")  # warm caches
        stages: dict[str, list[float]] = {}
        for q in questions:
            for stage, ms in pipeline.answer(q, collection="ll144").timings_ms.items():
                stages.setdefault(stage, []).append(ms)
        for stage, values in stages.items():
            rows.append(
                (
                    f"latency {stage} p50 / p95 (LL144, {len(values)} q)",
                    f"{percentile(values, 50):.1f} / {percentile(values, 95):.1f} ms",
                )
            )

        t = time.perf_counter()
        with ThreadPoolExecutor(args.concurrency) as pool:
            list(pool.map(lambda q: pipeline.answer(q, collection="ll144"), questions))
        qps = len(questions) / (time.perf_counter() - t)
        rows.append((f"throughput, {args.concurrency} concurrent askers", f"{qps:.1f} questions/s"))
        rows.append(("peak RSS (this process)", f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB"))
        rows.append(("cold start to first answer (new process)", f"{cold_start_seconds(data_dir, questions[0]):.2f} s"))

    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value}")


if __name__ == "__main__":
    main()
