"""Benchmark the embedded index: build, load from disk, hybrid query latency, peak RSS.

Synthetic data (no model): Zipf-distributed pseudo-words for the text, random unit vectors for the
embeddings. Query latency excludes the query embedding (`vector=` is passed), which costs ~15 ms
with all-MiniLM-L6-v2 on CPU.

    .venv/bin/python bench/bench_index.py [--n 100000] [--queries 200] [--dir DIR --keep]
"""
from __future__ import annotations

import argparse
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from core.types import Chunk  # noqa: E402 - after sys.path has the checkout
from storage.embedded import DocumentUpdate, EmbeddedIndex  # noqa: E402 - after sys.path has the checkout

COLLECTION = "bench"


class RandomEmbedder:
    """Random unit vectors: stands in for the model so the benchmark measures the index only."""

    def __init__(self, dim: int, seed: int = 0) -> None:
        self._dim = dim
        self._rng = np.random.default_rng(seed)

    @property
    def model_id(self) -> str:
        return f"random:{self._dim}"

    @property
    def dim(self) -> int:
        return self._dim

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self.embed_passages(texts)

    def embed_passages(self, texts: Sequence[str], show_progress: bool = False) -> np.ndarray:
        vectors = self._rng.standard_normal((len(texts), self._dim)).astype(np.float32)
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def make_vocabulary(size: int, rng: np.random.Generator) -> np.ndarray:
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    lengths = rng.integers(3, 11, size=size)
    return np.array(["".join(rng.choice(letters, n)) for n in lengths])


def zipf_word_ids(count: int, vocab_size: int, rng: np.random.Generator) -> np.ndarray:
    # Zipf-like frequencies, as in natural text: a few very common words, a long tail.
    ranks = np.arange(1, vocab_size + 1)
    p = 1.0 / ranks**1.07
    return rng.choice(vocab_size, size=count, p=p / p.sum())


def make_updates(n: int, words_per_chunk: int, chunks_per_doc: int, vocab: np.ndarray,
                 rng: np.random.Generator) -> list[DocumentUpdate]:
    word_ids = zipf_word_ids(n * words_per_chunk, len(vocab), rng).reshape(n, words_per_chunk)
    by_doc: dict[str, list[Chunk]] = {}
    for i in range(n):
        doc_id = f"doc{i // chunks_per_doc:05d}"
        text = " ".join(vocab[word_ids[i]])
        by_doc.setdefault(doc_id, []).append(Chunk(
            id=f"{doc_id}-{i:07d}", collection=COLLECTION, doc_id=doc_id, doc_title=doc_id,
            label=f"Bench § {i}", heading="", text=text, page_start=1, page_end=1,
            char_start=0, char_end=len(text),
        ))
    return [DocumentUpdate(d, f"hash-{d}", chunks) for d, chunks in by_doc.items()]


def make_queries(count: int, vocab: np.ndarray, dim: int, rng: np.random.Generator) -> list[tuple[str, np.ndarray]]:
    queries = []
    for _ in range(count):
        ids = zipf_word_ids(int(rng.integers(3, 9)), len(vocab), rng)
        vector = rng.standard_normal(dim).astype(np.float32)
        queries.append((" ".join(vocab[ids]), vector / np.linalg.norm(vector)))
    return queries


def percentiles(samples_ms: list[float]) -> str:
    ordered = sorted(samples_ms)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return f"p50 {statistics.median(ordered):7.2f} ms   p95 {p95:7.2f} ms   max {ordered[-1]:7.2f} ms"


def time_queries(index: EmbeddedIndex, queries, *, limit: int, fusion: str, alpha: float) -> list[float]:
    samples = []
    for text, vector in queries:
        start = time.perf_counter()
        index.hybrid_search(text, collection=COLLECTION, limit=limit, fusion=fusion, alpha=alpha, vector=vector)
        samples.append((time.perf_counter() - start) * 1000)
    return samples


def time_concurrent(index: EmbeddedIndex, queries, *, threads: int, limit: int) -> tuple[list[float], float]:
    samples: list[float] = []
    lock = threading.Lock()

    def worker(part) -> None:
        local = time_queries(index, part, limit=limit, fusion="rankedFusion", alpha=0.5)
        with lock:
            samples.extend(local)

    parts = [queries[i::threads] for i in range(threads)]
    start = time.perf_counter()
    pool = [threading.Thread(target=worker, args=(p,)) for p in parts]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    return samples, time.perf_counter() - start


def peak_rss_mb(who: int = resource.RUSAGE_SELF) -> float:
    return resource.getrusage(who).ru_maxrss / 1024  # KiB on Linux


def build(args: argparse.Namespace, root: Path) -> None:
    rng = np.random.default_rng(42)
    t = time.perf_counter()
    vocab = make_vocabulary(args.vocab, rng)
    updates = make_updates(args.n, args.words, args.chunks_per_doc, vocab, rng)
    print(f"generated {args.n} chunks x {args.words} words in {time.perf_counter() - t:.1f} s")
    writer = EmbeddedIndex(root, embedder=RandomEmbedder(args.dim), candidates=args.candidates)
    t = time.perf_counter()
    writer.replace_documents(COLLECTION, updates)
    print(f"build + save (tokenize, BM25 index, vectors, chunks, fsync): {time.perf_counter() - t:.1f} s")
    size_mb = sum(f.stat().st_size for f in root.rglob("*") if f.is_file()) / 2**20
    print(f"on disk: {size_mb:.0f} MiB")


def serve(args: argparse.Namespace, root: Path) -> None:
    rng = np.random.default_rng(42)
    vocab = make_vocabulary(args.vocab, rng)  # same seed as the build: queries use indexed words
    reader = EmbeddedIndex(root, embedder=RandomEmbedder(args.dim), candidates=args.candidates)
    t = time.perf_counter()
    count = len(reader.chunks(COLLECTION))
    print(f"load from disk: {time.perf_counter() - t:.2f} s ({count} chunks)")

    queries = make_queries(args.queries, vocab, args.dim, np.random.default_rng(7))
    time_queries(reader, queries[:10], limit=args.limit, fusion="rankedFusion", alpha=0.5)  # warm-up
    print(f"\nquery latency over {len(queries)} queries (limit {args.limit}, "
          f"{args.candidates} candidates per side, query embedding excluded):")
    for label, fusion, alpha in (
        ("hybrid rankedFusion a=0.5     ", "rankedFusion", 0.5),
        ("hybrid relativeScoreFusion 0.5", "relativeScoreFusion", 0.5),
        ("BM25 only (alpha=0)           ", "rankedFusion", 0.0),
        ("dense only (alpha=1)          ", "rankedFusion", 1.0),
    ):
        samples = time_queries(reader, queries, limit=args.limit, fusion=fusion, alpha=alpha)
        print(f"  {label}  {percentiles(samples)}")
    samples, wall = time_concurrent(reader, queries, threads=args.threads, limit=args.limit)
    print(f"  {args.threads} concurrent askers (hybrid) {percentiles(samples)}   "
          f"throughput {len(queries) / wall:.0f} q/s")


def build_in_child_process(script: str, root: Path, args: argparse.Namespace, names: Sequence[str]) -> None:
    """Run `script --build-only --dir root` with the given args, so the parent's peak RSS is the
    serving process's own (a bot replica only loads and queries)."""
    child = [sys.executable, script, "--build-only", "--dir", str(root)]
    for name in names:
        child += [f"--{name.replace('_', '-')}", str(getattr(args, name))]
    subprocess.run(child, check=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=100_000, help="chunks")
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--words", type=int, default=100, help="words per chunk")
    parser.add_argument("--vocab", type=int, default=50_000)
    parser.add_argument("--chunks-per-doc", type=int, default=100)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--limit", type=int, default=5)
    parser.add_argument("--candidates", type=int, default=50)
    parser.add_argument("--threads", type=int, default=8, help="concurrent askers for the last test")
    parser.add_argument("--dir", type=Path, default=None, help="index directory (default: a temp dir)")
    parser.add_argument("--keep", action="store_true", help="keep the index directory")
    parser.add_argument("--reuse", action="store_true", help="skip the build if --dir holds an index")
    parser.add_argument("--build-only", action="store_true", help=argparse.SUPPRESS)  # child process
    args = parser.parse_args()

    root = args.dir or Path(tempfile.mkdtemp(prefix="hypa-bench-"))
    if args.build_only:
        build(args, root)
        return
    try:
        if not (args.reuse and (root / COLLECTION / "CURRENT").is_file()):
            build_in_child_process(__file__, root, args, ("n", "dim", "words", "vocab", "chunks_per_doc", "candidates"))
            print(f"peak RSS while building: {peak_rss_mb(resource.RUSAGE_CHILDREN):.0f} MiB")
        serve(args, root)
        print(f"\npeak RSS while loading and serving: {peak_rss_mb():.0f} MiB")
    finally:
        if not args.keep and args.dir is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
