"""Knowledge-graph loads under storage/kg_store.py's bounds: real graphs, a large one, and bombs.

    .venv/bin/python bench/bench_kg_load.py [--dir DATA_DIR/kg] [--repeat 5] [--scale 40]

Prints, per stored graph file (`--dir`, default HYPA_DATA_DIR/kg): its size and the p50 time of a
full load (opcode scan, unpickling, the plain-data/shared-reference/depth walk, KGData validation)
next to an unchecked `pickle.loads` + `KGData.from_plain` of the same bytes; then the same for one
synthetic graph `--scale` times the largest file (its throughput says how long a file at
HYPA_KG_MAX_FILE_MB would take against HYPA_KG_LOAD_TIMEOUT_S); then the time until a
"previous level, twice" bomb is refused at 12, 22, 30 and 40 levels (before the bounds, 22 levels took
1-4 s and 40 never finished).
"""
from __future__ import annotations

import argparse
import pickle
import statistics
import time
from pathlib import Path

from bot.cli_common import load_settings  # sets the offline environment first  # isort: skip
from core.errors import KGLimitExceeded
from core.kg.model import KGData
from storage.kg_store import DEFAULT_LIMITS, load_payload


def _p50_ms(call, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        call()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def _scaled(payload: bytes, scale: int) -> bytes:
    """The graph with every triplet and entity repeated `scale` times under new keys (no shared containers)."""
    plain = pickle.loads(payload)
    entities, triplets = plain["entities"], plain["triplets"]
    plain["entities"] = {
        f"{key}#{i}": {**row, "aliases": list(row["aliases"]), "definitions": [tuple(d) for d in row["definitions"]]}
        for i in range(scale) for key, row in entities.items()
    }
    plain["triplets"] = [(f"{t[0]}#{i}", *t[1:]) for i in range(scale) for t in triplets]
    return pickle.dumps(plain, protocol=4)


def _bomb(levels: int) -> bytes:
    level: list = []
    for _ in range(levels):
        level = [level, level]
    return pickle.dumps(level, protocol=4)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dir", type=Path, default=None, help="folder of *.kg.pkl files [default: HYPA_DATA_DIR/kg]")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--scale", type=int, default=40, help="the large graph is this many times the largest file")
    args = parser.parse_args()
    folder = args.dir or load_settings().kg_dir
    files = sorted(folder.glob("*.kg.pkl"))
    if not files:
        raise SystemExit(f"no *.kg.pkl in {folder}; build one (`hypa index build ll144`) or pass --dir")
    print(
        f"limits: {DEFAULT_LIMITS.max_bytes / 2**20:.0f} MB, {DEFAULT_LIMITS.max_seconds:g} s, depth {DEFAULT_LIMITS.max_depth}"
    )
    print(f"{'file':<28} {'MB':>7} {'bounded load p50':>17} {'unchecked p50':>14} {'MB/s bounded':>13}")
    rows = [(f.name, f.read_bytes()) for f in files]
    largest = max(rows, key=lambda r: len(r[1]))
    rows.append((f"{largest[0]} x{args.scale}", _scaled(largest[1], args.scale)))
    for name, payload in rows:
        mb = len(payload) / 2**20
        bounded = _p50_ms(lambda payload=payload, name=name: load_payload(payload, name), args.repeat)
        unchecked = _p50_ms(lambda payload=payload: KGData.from_plain(pickle.loads(payload)), args.repeat)
        print(f"{name:<28} {mb:>7.2f} {bounded:>14.1f} ms {unchecked:>11.1f} ms {mb / (bounded / 1000):>13.1f}")
    for levels in (12, 22, 30, 40):
        payload = _bomb(levels)
        t0 = time.perf_counter()
        try:
            load_payload(payload, "bomb")
        except KGLimitExceeded as exc:
            refused = str(exc).split(": ", 1)[1].split(":")[0]
        else:  # pragma: no cover - would be a regression
            refused = "NOT REFUSED"
        print(
            f"bomb of {levels} levels ({len(payload)} bytes): refused in {(time.perf_counter() - t0) * 1000:.2f} ms ({refused})"
        )


if __name__ == "__main__":
    main()
