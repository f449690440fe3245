"""Adaptive classifier latency per question, quiet and with every core kept busy, with and without hypa's BLAS limit.

    HYPA_DATA_DIR=... .venv/bin/python bench/bench_classifier_load.py [--classes 3] [--repeat 3] [--busy N]

Loads the saved classifier of HYPA_DATA_DIR (e.g. `hypa classifier train --kind tfidf-svm+tokcnn
--classes 3`), and times each dev-set question (../shared/data/eval/ll144_dev.jsonl) two ways:
`classifier.predict` as the library leaves it (OpenBLAS's default threads, unless the environment
sets OPENBLAS_NUM_THREADS) and `ConfigPolicy.select`, the pipeline's step, which runs the classifier
inside core.blas_threads.single_blas_thread(). Then again while `--busy` processes (default: one per
core) spin on the CPU. Prints mean / p50 / p95 / max in ms.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import time
from pathlib import Path

from bot.cli_common import load_settings  # sets the offline environment first  # isort: skip
from core.adaptive import ConfigPolicy
from core.complexity import classifier_dir, load_classifier
from core.params import DEFAULT_CONFIG_PATH, load_configs
from core.types import RetrievalParams

DEV = Path(__file__).resolve().parents[2] / "shared" / "data" / "eval" / "ll144_dev.jsonl"


def _spin() -> None:
    while True:
        pass


def _row(name: str, times_ms: list[float]) -> str:
    ordered = sorted(times_ms)
    p95 = ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]
    return (f"{name:<48} mean {statistics.fmean(ordered):7.2f}  p50 {statistics.median(ordered):6.2f}  "
            f"p95 {p95:7.2f}  max {ordered[-1]:7.2f} ms")


def _time(step, questions: list[str], repeat: int) -> list[float]:
    times = []
    for _ in range(repeat):
        for q in questions:
            t0 = time.perf_counter()
            step(q)
            times.append((time.perf_counter() - t0) * 1000)
    return times


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--classes", type=int, default=3)
    parser.add_argument("--dataset", type=Path, default=DEV)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--busy", type=int, default=os.cpu_count() or 2, help="spinning processes while loaded")
    args = parser.parse_args()
    settings = load_settings()
    folder = classifier_dir(settings.data_dir, args.classes)
    classifier = load_classifier(folder)
    config = next(c for c in load_configs(DEFAULT_CONFIG_PATH).values() if c.adaptive and c.classes == args.classes)
    policy = ConfigPolicy(config, RetrievalParams(top_k=7, fusion="rankedFusion", alpha=0.5), classifier)
    questions = [json.loads(line)["question"] for line in args.dataset.open(encoding="utf-8") if line.strip()]
    steps = {
        "classifier.predict (library default threads)": lambda q: classifier.predict(q),
        "ConfigPolicy.select (hypa: one BLAS thread)": lambda q: policy.select(q, None),
    }
    for step in steps.values():  # warm up (first calls load tokenizer tables, allocate)
        _time(step, questions[:10], 1)
    print(f"{type(classifier).__name__} from {folder}; {len(questions)} questions x {args.repeat}; "
          f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', '(unset)')}; load {os.getloadavg()[0]:.1f}")
    for name, step in steps.items():
        print("quiet  ", _row(name, _time(step, questions, args.repeat)))
    spinners = [multiprocessing.Process(target=_spin, daemon=True) for _ in range(args.busy)]
    for p in spinners:
        p.start()
    try:
        time.sleep(1.0)
        for name, step in steps.items():
            print(f"busy x{args.busy}", _row(name, _time(step, questions, args.repeat)))
    finally:
        for p in spinners:
            p.terminate()
        for p in spinners:
            p.join()


if __name__ == "__main__":
    main()
