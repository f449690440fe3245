"""`hypa ingest` on one large text file: time, memory, the size limit and Ctrl-C.

    .venv/bin/python bench/bench_ingest_file.py [--mb 0.4] [--refuse-mb 50] [--interrupt-after 15]

Runs the real CLI (`python -m bot ingest`, the packaged embedding model through ONNX Runtime) in a
fresh data directory on a synthetic regulation-like text (numbered sections of legal-sounding
sentences), after a warm-up ingest that exports the model once. Reported:

* ingesting `--mb` MB: wall time, chunks, sentences embedded, peak memory (max RSS of the process),
  and what that means per MB;
* a `--refuse-mb` MB file (over HYPA_INGEST_MAX_FILE_MB): how long until it is refused, and its message;
* SIGINT (Ctrl-C) `--interrupt-after` seconds into ingesting `--mb` MB into a new collection: the exit
  code, how long stopping took, its message, and whether a collection folder was left behind.
"""
from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORDS = (
    "employer employment agency automated decision tool candidate notice bias audit independent auditor "
    "data selection rate impact ratio category sex race ethnicity shall must may within business days "
    "penalty violation person record retain publish summary distribution date"
).split()


def regulation_text(megabytes: float, seed: int = 7) -> str:
    rng = random.Random(seed)
    parts, size, n = [], 0, 0
    while size < megabytes * 1_000_000:
        n += 1
        sentences = [
            " ".join(rng.choice(WORDS) for _ in range(rng.randint(12, 30))).capitalize() + "."
            for _ in range(rng.randint(3, 8))
        ]
        part = f"Section {n}. Provision {n}.\n\n(a) " + " ".join(sentences[:len(sentences) // 2]) + "\n\n(b) " + \
            " ".join(sentences[len(sentences) // 2:]) + "\n\n"
        parts.append(part)
        size += len(part)
    return "".join(parts)


def hypa(data_dir: Path, *args: str, **popen) -> subprocess.Popen:
    env = {**os.environ, "HYPA_DATA_DIR": str(data_dir), "HYPA_CORPUS_MIRROR": "", "COLUMNS": "200"}
    return subprocess.Popen(
        [sys.executable, "-m", "bot", "ingest", *args], cwd=ROOT, env=env, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True,
        # Background jobs start with SIGINT ignored; restore it, as in a terminal.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL), **popen,
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=0.4, help="size of the text file ingested in full")
    ap.add_argument("--refuse-mb", type=float, default=50.0, help="size of the file that must be refused")
    ap.add_argument("--interrupt-after", type=float, default=15.0, help="seconds before SIGINT")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory(prefix="hypa-ingest-bench-") as tmp:
        tmp_path, data = Path(tmp), Path(tmp) / "data"
        warm = tmp_path / "warm.md"
        warm.write_text("# Warm\n\n## Section 1. Scope.\n\n(a) A seller shall notify each buyer.\n", encoding="utf-8")
        hypa(data, str(warm), "-c", "warm").communicate()  # exports the model to ONNX once

        doc = tmp_path / "regulation.txt"
        doc.write_text(regulation_text(args.mb), encoding="utf-8")
        started = time.perf_counter()
        proc = hypa(data, str(doc), "-c", "big")
        out = proc.stdout.read()
        _, _, usage = os.wait4(proc.pid, 0)  # this process's own peak, not the warm-up's model export
        proc.returncode = 0
        took = time.perf_counter() - started
        peak_mb = usage.ru_maxrss / 1024
        added = next((line for line in out.splitlines() if line.startswith("added")), out.strip()[-300:])
        stages = [line for line in out.splitlines() if line.startswith("regulation.txt: ")]
        chunks = next((int(s.rsplit("(", 1)[1].rstrip(")")) for s in stages if "embedding chunks" in s), 0)
        sentences = next((int(s.rsplit("(", 1)[1].rstrip(")")) for s in stages if "embedding sentences" in s), 0)
        size_mb = doc.stat().st_size / 1e6
        print(f"ingest {size_mb:.2f} MB of text: {took:.1f} s, {chunks} chunks, {sentences} sentences and headings; "
              f"peak memory {peak_mb:.0f} MB")
        print(f"  -> {took / size_mb:.0f} s per MB of text; {added}")
        print(f"  stages shown: {'; '.join(s.split(': ', 1)[1] for s in stages)}")

        huge = tmp_path / "huge.txt"
        with open(huge, "w", encoding="utf-8") as fh:
            block = regulation_text(1.0)
            for _ in range(int(args.refuse_mb)):
                fh.write(block)
        started = time.perf_counter()
        out, _ = hypa(data, str(huge), "-c", "huge").communicate()
        refused = next((line for line in out.splitlines() if line.startswith("failed")), out.strip()[-300:])
        print(f"a {huge.stat().st_size / 1e6:.0f} MB file: refused after {time.perf_counter() - started:.1f} s: {refused}")

        proc = hypa(data, str(doc), "-c", "stopped")
        time.sleep(args.interrupt_after)
        started = time.perf_counter()
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=120)
        stopped = next((line for line in out.splitlines() if line.startswith("stopped")), out.strip()[-300:])
        left = (data / "index" / "stopped").exists()
        print(f"SIGINT after {args.interrupt_after:g} s: exit {proc.returncode} after {time.perf_counter() - started:.1f} s; "
              f"collection folder left behind: {'yes' if left else 'no'}; {stopped}")


if __name__ == "__main__":
    main()
