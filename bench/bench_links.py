"""What links to the law cost an answer: resolving its citations' addresses (core/links.py) the way
`hypa serve` does it (bot/wiring.py Components.citation_links: the document records read from the
index per answer, the manifest's patterns, one pattern filled per citation).

Synthetic index of N chunks in D documents on the embedded backend (random unit vectors: no model is
loaded; the vectors are not what is measured). Each answer cites 5 chunks of 5 documents, one of them a
manifest document ("euaiact" in collection "eu-ai-act" would be; here a document with a stored
pattern), the others with `--source-url` patterns.

    .venv/bin/python bench/bench_links.py [--sizes 850,20000,100000] [--answers 300]

Prints one line per size and a JSON line (for docs/RESULTS.md).
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_index import RandomEmbedder  # noqa: E402

from core.links import CitationLinks, DocumentLinks  # noqa: E402
from core.types import Answer, Chunk, Citation, ScoredChunk  # noqa: E402
from storage.embedded import DocumentUpdate, EmbeddedIndex  # noqa: E402

COLLECTION = "links"
DOCUMENTS = 20
PATTERNS = (
    "https://eur-lex.europa.eu/eli/reg/2024/1689/oj#art_{article}",
    "https://example.com/policies/handbook.pdf#page={page}",
    "https://example.com/code#sec-{section}",
)


def build(root: Path, n: int) -> EmbeddedIndex:
    index = EmbeddedIndex(root, embedder=RandomEmbedder(384), candidates=100)
    per_doc = n // DOCUMENTS
    updates = []
    for d in range(DOCUMENTS):
        chunks = [
            Chunk(
                id=f"d{d}-c{i}", collection=COLLECTION, doc_id=f"doc{d}", doc_title=f"Document {d}",
                label=f"Doc {d} Art. {i + 1}(2) § {d}-{i}", heading="", text=f"provision {i} of document {d}",
                page_start=1 + i // 5, page_end=1 + i // 5, char_start=0, char_end=10,
            )
            for i in range(per_doc)
        ]
        updates.append(DocumentUpdate(f"doc{d}", f"h{d}", chunks, source_url=PATTERNS[d % len(PATTERNS)]))
    index.replace_documents(COLLECTION, updates)
    return index


def links_of(index: EmbeddedIndex):
    """As Components.citation_links: stored patterns read per answer (no manifest collection here)."""

    def of(collection: str) -> dict[str, DocumentLinks]:
        return {i.doc_id: DocumentLinks.single(i.source_url) for i in index.document_info(collection) if i.source_url}

    return of


def measure(n: int, answers: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        index = build(Path(tmp), n)
        chunks = index.chunks(COLLECTION)
        links = CitationLinks(links_of(index))
        step = len(chunks) // 5
        contexts = [ScoredChunk(chunks[k * step], 1.0) for k in range(5)]
        citations = [Citation(k + 1, sc.chunk.id, sc.chunk.label, "q") for k, sc in enumerate(contexts)]
        answer = Answer("x", refused=False, citations=citations)
        linked = links.link(answer, contexts)
        assert all(c.url for c in linked.citations), linked.citations
        times = []
        for _ in range(answers):
            started = time.perf_counter()
            links.link(answer, contexts)
            times.append((time.perf_counter() - started) * 1000.0)
        times.sort()
        return {
            "chunks": len(chunks), "documents": DOCUMENTS, "citations": 5, "answers": answers,
            "p50_ms": round(statistics.median(times), 3), "p95_ms": round(times[int(0.95 * (len(times) - 1))], 3),
            "example": linked.citations[0].url,
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="850,20000,100000")
    parser.add_argument("--answers", type=int, default=300)
    args = parser.parse_args()
    rows = [measure(int(n), args.answers) for n in args.sizes.split(",")]
    for r in rows:
        print(f"{r['chunks']:>7} chunks, {r['documents']} documents: linking 5 citations p50 {r['p50_ms']:.3f} ms, "
              f"p95 {r['p95_ms']:.3f} ms ({r['answers']} answers)")
    print(json.dumps({"bench": "links", "rows": rows}))


if __name__ == "__main__":
    main()
