"""The embedded index at 100,000 chunks: load time, hybrid query latency, memory and disk per chunk.

Synthetic on purpose: chunk texts are Zipf-distributed pseudo-words, 150-300 words each (LL144 and
EU AI Act chunks are 100-400 words), and vectors are random unit vectors of 384 dimensions (the size
of all-MiniLM-L6-v2's). The embedding model is not what is measured: query vectors are precomputed
and passed as `vector=` (embedding one query costs ~10-25 ms on CPU, measured in bench_pipeline.py).
Random vectors make the dense side as expensive as real ones (a full matrix-vector product).

    .venv/bin/python bench/bench_100k.py [--n 100000] [--queries 300] [--dir DIR --keep]

The index is built in a child process, so the serving figures (RSS) are those of a process that
only loads and queries, as a bot replica does. Prints a table and one JSON line (for RESULTS.md).
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_index import RandomEmbedder, build_in_child_process, make_queries, make_vocabulary, zipf_word_ids  # noqa: E402 - after sys.path has the checkout

from core.types import Chunk  # noqa: E402 - after sys.path has the checkout
from storage.embedded import DocumentUpdate, EmbeddedIndex  # noqa: E402 - after sys.path has the checkout

COLLECTION = "bench100k"
GIB = 2**30


def rss_bytes() -> int:
    """Current resident set size (not the peak): /proc/self/statm, pages."""
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * resource.getpagesize()


def make_updates(n: int, min_words: int, max_words: int, per_doc: int, vocab: np.ndarray,
                 rng: np.random.Generator) -> list[DocumentUpdate]:
    lengths = rng.integers(min_words, max_words + 1, size=n)
    words = vocab[zipf_word_ids(int(lengths.sum()), len(vocab), rng)]
    bounds = np.concatenate([[0], np.cumsum(lengths)])
    by_doc: dict[str, list[Chunk]] = {}
    for i in range(n):
        doc_id = f"doc{i // per_doc:05d}"
        text = " ".join(words[bounds[i]:bounds[i + 1]])
        by_doc.setdefault(doc_id, []).append(Chunk(
            id=f"{doc_id}-{i:07d}", collection=COLLECTION, doc_id=doc_id, doc_title=f"Synthetic {doc_id}",
            label=f"Synthetic § {i}", heading=f"Heading {i % 997}", text=text, page_start=1 + i % 400,
            page_end=1 + i % 400, char_start=0, char_end=len(text),
        ))
    return [DocumentUpdate(d, f"hash-{d}", chunks) for d, chunks in by_doc.items()]


def build(args: argparse.Namespace, root: Path) -> None:
    rng = np.random.default_rng(42)
    t = time.perf_counter()
    vocab = make_vocabulary(args.vocab, rng)
    updates = make_updates(args.n, args.min_words, args.max_words, args.per_doc, vocab, rng)
    words = sum(len(c.text.split()) for u in updates for c in u.chunks)
    print(f"generated {args.n:,} chunks, {words / args.n:.0f} words each on average, in {time.perf_counter() - t:.1f} s")
    t = time.perf_counter()
    EmbeddedIndex(root, embedder=RandomEmbedder(args.dim)).replace_documents(COLLECTION, updates)
    print(f"built and saved in {time.perf_counter() - t:.1f} s "
          f"(peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB)")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def serve(args: argparse.Namespace, root: Path) -> dict:
    rng = np.random.default_rng(42)
    vocab = make_vocabulary(args.vocab, rng)  # same seed as the build: queries use indexed words
    queries = make_queries(args.queries, vocab, args.dim, np.random.default_rng(7))
    disk = sum(f.stat().st_size for f in (root / COLLECTION).rglob("*") if f.is_file())

    before = rss_bytes()
    t = time.perf_counter()
    index = EmbeddedIndex(root, embedder=RandomEmbedder(args.dim))
    n = len(index.chunks(COLLECTION))  # loads the snapshot: chunks, vectors, BM25
    load_s = time.perf_counter() - t
    index_rss = rss_bytes() - before

    for text, vector in queries[:20]:  # warm-up
        index.hybrid_search(text, collection=COLLECTION, limit=args.limit, vector=vector)
    # Wall time is what a user waits; CPU time (all of this process's threads) shows how much of it
    # is the query itself when other processes compete for the 2 cores.
    latency: dict[str, list[float]] = {}
    cpu: dict[str, list[float]] = {}
    for fusion in ("rankedFusion", "relativeScoreFusion"):
        latency[fusion], cpu[fusion] = [], []
        for text, vector in queries:
            start, start_cpu = time.perf_counter(), time.process_time()
            index.hybrid_search(text, collection=COLLECTION, limit=args.limit, fusion=fusion, alpha=0.5, vector=vector)
            latency[fusion].append((time.perf_counter() - start) * 1000)
            cpu[fusion].append((time.process_time() - start_cpu) * 1000)
    # Throughput: concurrent askers on one process (a replica's thread pool), hybrid rankedFusion.
    start = time.perf_counter()
    with ThreadPoolExecutor(args.threads) as pool:
        list(pool.map(lambda q: index.hybrid_search(q[0], collection=COLLECTION, limit=args.limit, vector=q[1]), queries))
    throughput = len(queries) / (time.perf_counter() - start)
    return {
        "chunks": n,
        f"hybrid_queries_per_s_{args.threads}_threads": round(throughput, 1),
        "candidates_per_side": index.candidates,
        "load_s": round(load_s, 2),
        "hybrid_ranked_p50_ms": round(statistics.median(latency["rankedFusion"]), 2),
        "hybrid_ranked_p95_ms": round(percentile(latency["rankedFusion"], 95), 2),
        "hybrid_relative_p50_ms": round(statistics.median(latency["relativeScoreFusion"]), 2),
        "hybrid_relative_p95_ms": round(percentile(latency["relativeScoreFusion"], 95), 2),
        "hybrid_ranked_cpu_p50_ms": round(statistics.median(cpu["rankedFusion"]), 2),
        "load_avg_1min_at_end": round(os.getloadavg()[0], 1),
        "index_rss_mib": round(index_rss / 2**20),
        "process_rss_mib": round(rss_bytes() / 2**20),
        "disk_mib": round(disk / 2**20),
        "chunks_per_gib_ram": int(GIB / (index_rss / n)),
        "chunks_per_gib_disk": int(GIB / (disk / n)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--min-words", type=int, default=150)
    parser.add_argument("--max-words", type=int, default=300)
    parser.add_argument("--vocab", type=int, default=50_000)
    parser.add_argument("--per-doc", type=int, default=100, help="chunks per document")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--limit", type=int, default=7)
    parser.add_argument("--threads", type=int, default=4, help="concurrent askers for the throughput figure")
    parser.add_argument("--dir", type=Path, default=None, help="index directory (default: a temp dir)")
    parser.add_argument("--keep", action="store_true")
    parser.add_argument("--reuse", action="store_true", help="skip the build if --dir holds the index")
    parser.add_argument("--build-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()

    root = args.dir or Path(tempfile.mkdtemp(prefix="hypa-100k-"))
    if args.build_only:
        build(args, root)
        return
    try:
        if not (args.reuse and (root / COLLECTION / "CURRENT").is_file()):
            build_in_child_process(__file__, root, args, ("n", "dim", "min_words", "max_words", "vocab", "per_doc"))
        result = serve(args, root)
    finally:
        if not args.keep and args.dir is None:
            shutil.rmtree(root, ignore_errors=True)
        elif args.dir is None:  # --keep of a temp dir: say where it is (~450 MB at 100k chunks)
            print(f"index kept in {root}")
    width = max(map(len, result))
    for key, value in result.items():
        print(f"{key:<{width}}  {value:,}" if isinstance(value, int) else f"{key:<{width}}  {value}")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
