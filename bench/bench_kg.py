"""Knowledge-graph stage latency: entity matching + walk + fact ranking, per dev-set question.

    HYPA_DATA_DIR=... .venv/bin/python bench/bench_kg.py [--collection ll144] [--dataset FILE]

Needs an index of the collection (`hypa index build ll144`); the graph is loaded (or built) the way
the pipeline does it. Query vectors are computed before the clock starts (the pipeline already has
them); entity-name vectors are computed once, also before timing. Prints p50/p95 per (K, S) row of
the paper's 3-class table and the offline extraction time for the whole collection.
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from bot.cli_common import load_settings  # sets the offline environment first  # isort: skip
from bot.wiring import Components
from core.eval.metrics import percentile
from core.kg.offline import OfflineExtractor

DEV = Path(__file__).resolve().parents[2] / "shared" / "data" / "eval" / "ll144_dev.jsonl"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--collection", default="ll144")
    parser.add_argument("--dataset", type=Path, default=DEV)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    components = Components(load_settings())
    chunks = components.index.chunks(args.collection)
    t0 = time.perf_counter()
    OfflineExtractor().extract(args.collection, chunks, components.index.documents(args.collection))
    extract_s = time.perf_counter() - t0
    graphs = components.knowledge_graph
    retriever = graphs(args.collection) if graphs is not None else None
    if retriever is None:
        raise SystemExit(f"no knowledge graph for {args.collection!r} (empty collection, or HYPA_KG_EXTRACTOR=none)")
    questions = [json.loads(line)["question"] for line in args.dataset.open(encoding="utf-8") if line.strip()]
    vectors = components.embedder.embed_queries(questions)
    retriever.match_entities("warm up", 1, vectors[0])  # entity-name vectors: once per graph
    print(f"collection {args.collection}: {len(chunks)} chunks, {len(retriever.data.triplets)} triplets, "
          f"{len(retriever.data.entities)} entities, {retriever.fact_count} facts; offline extraction {extract_s * 1000:.0f} ms")
    for k, s in ((3, 1), (4, 2), (5, 3)):
        times = []
        for _ in range(args.repeat):
            for q, v in zip(questions, vectors):
                t = time.perf_counter()
                retriever.retrieve(q, keywords=k, depth=s, query_vector=v)
                times.append((time.perf_counter() - t) * 1000)
        print(f"K={k} S={s}: p50 {percentile(times, 50):.2f} ms, p95 {percentile(times, 95):.2f} ms ({len(times)} calls)")


if __name__ == "__main__":
    main()
