"""Tune the sentence-embedding model on pairs of texts that belong together (core/tuning.py).

In-batch contrastive training (each anchor against every other positive in its batch, both ways: the
objective of sentence-transformers' MultipleNegativesRankingLoss), one pass, written as a plain torch
loop so no training framework is needed. Seeded and single-process, so the same pairs give the same
model on a machine. The result is a sentence-transformers folder like the one it starts from, with
`hypa_tuning.json` saying what it was tuned on; it is written beside its destination and moved into
place only when complete, so a stopped run leaves no half model.
"""
from __future__ import annotations

import contextlib
import json
import random
import shutil
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

from core.errors import EmbeddingModelNotFound
from storage.embedder import quiet_weight_loading

TUNING_RECORD = "hypa_tuning.json"


@dataclass(frozen=True)
class TuningSetup:
    batch_size: int = 32
    learning_rate: float = 2e-5
    scale: float = 20.0  # cosine similarities times this are the logits (sentence-transformers' default)
    seed: int = 0


@dataclass(frozen=True)
class TuningRecord:
    base_model: str
    pairs: int
    batches: int
    setup: TuningSetup
    tuned_at: str
    note: str = ""


@contextlib.contextmanager
def _quiet_saving() -> Iterator[None]:
    """No "Writing model shards" bar from huggingface_hub in the CLI's output."""
    try:
        from huggingface_hub.utils import disable_progress_bars, enable_progress_bars
    except ImportError:  # an older hub: its bar is only cosmetic
        yield
        return
    disable_progress_bars()
    try:
        yield
    finally:
        enable_progress_bars()


def is_tuned_model(path: Path) -> bool:
    """A complete tuned model folder (its record is written last)."""
    return (path / TUNING_RECORD).is_file() and (path / "config.json").is_file()


def tune_embedding_model(
    base: Path,
    pairs: Sequence[tuple[str, str]],
    out: Path,
    *,
    setup: TuningSetup = TuningSetup(),
    note: str = "",
    progress: Callable[[int, int], None] | None = None,
) -> TuningRecord:
    """Train a copy of the model in `base` on `pairs` and save it to `out` (replaced if present).
    `progress(done, total)` is told after every batch."""
    import torch
    import torch.nn.functional as F  # noqa: N812 - torch's own idiom
    from sentence_transformers import SentenceTransformer

    if not (base / "config.json").is_file():
        raise EmbeddingModelNotFound(f"no sentence-transformers model in {base}")
    if len(pairs) < setup.batch_size:
        raise ValueError(f"{len(pairs)} pairs are too few to tune on (at least {setup.batch_size})")
    torch.manual_seed(setup.seed)
    order = list(pairs)
    random.Random(setup.seed).shuffle(order)
    batches = [order[i : i + setup.batch_size] for i in range(0, len(order) - setup.batch_size + 1, setup.batch_size)]
    quiet_weight_loading()
    model = SentenceTransformer(str(base), device="cpu", local_files_only=True)
    # sentence-transformers 6 renamed tokenize to preprocess (the old name warns on every call).
    encode_inputs = getattr(model, "preprocess", None) or model.tokenize
    model.train()
    optimiser = torch.optim.AdamW(model.parameters(), lr=setup.learning_rate)
    for done, batch in enumerate(batches, start=1):
        anchors = F.normalize(model(encode_inputs([a for a, _ in batch]))["sentence_embedding"], dim=-1)
        positives = F.normalize(model(encode_inputs([p for _, p in batch]))["sentence_embedding"], dim=-1)
        logits = anchors @ positives.T * setup.scale
        labels = torch.arange(len(batch))
        loss = (F.cross_entropy(logits, labels) + F.cross_entropy(logits.T, labels)) / 2
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        if progress is not None:
            progress(done, len(batches))
    model.eval()
    record = TuningRecord(
        base_model=str(base), pairs=len(order), batches=len(batches), setup=setup,
        tuned_at=datetime.now(UTC).isoformat(timespec="seconds"), note=note,
    )
    staging = out.with_name(out.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    with _quiet_saving():
        model.save(str(staging))
    (staging / TUNING_RECORD).write_text(json.dumps(asdict(record), indent=2) + "\n", encoding="utf-8")
    shutil.rmtree(out, ignore_errors=True)
    staging.rename(out)
    return record
