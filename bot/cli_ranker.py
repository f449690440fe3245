"""`hypa ranker train|show`: the learned provision ranker's weights (core/ranking.py)."""
from __future__ import annotations

from pathlib import Path

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from bot.cli_common import command_group, err, fail, load_settings, out

ranker_app = command_group(help="Train and inspect the provision ranker's weights.", no_args_is_help=True)


@ranker_app.command("train")
def ranker_train(
    questions: list[Path] = typer.Argument(
        ..., help="User-style question files (JSONL with question, collection, evidence), e.g. tests/data/user_questions/*_train.jsonl."
    ),
    out_path: Path = typer.Option(..., "--out", "-o", help="Where to write the weights (JSON)."),
    l2: float = typer.Option(1e-3, "--l2", min=0.0, help="L2 penalty on the weights."),
) -> None:
    """Learn weights that put the provisions holding each question's evidence first.

    Every question is planned, embedded and scored exactly as `hypa ask` does; each collection
    named by the questions must be in the index. Use HYPA_RANKER_WEIGHTS=PATH to answer with them.
    """
    import numpy as np

    from bot.wiring import Components
    from core.ranking import FEATURES, RankerWeights
    from core.ranking_train import read_training_questions, train

    for path in questions:
        if not path.is_file():
            fail(f"no such file: {path}")
    try:
        rows = read_training_questions(questions)
    except (ValueError, KeyError) as exc:
        fail(f"cannot read the questions: {exc}")
    if not rows:
        fail("no answerable question with evidence in those files")
    components = Components(load_settings(), overrides={"ranker_weights": RankerWeights(np.zeros(len(FEATURES), dtype=np.float32))})
    missing = sorted({q.collection for q in rows} - set(components.index.collections()))
    if missing:
        fail(f"collection(s) {', '.join(missing)} not in the index; build them first (`hypa index build NAME`)")
    pipeline = components.pipeline

    def features(question, history, collection):  # noqa: ANN001, ANN202
        return pipeline.provision_features(question, history, collection=collection)

    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=err) as bar:
        task = bar.add_task("questions", total=len(rows))
        weights, data = train(questions, features, l2=l2, progress=lambda: bar.advance(task))
    out_path.parent.mkdir(parents=True, exist_ok=True)
    weights.save(out_path)
    if data.skipped:
        err.print(f"[yellow]{len(data.skipped)} questions skipped: no provision holds their evidence ({', '.join(data.skipped[:5])}…)[/]")
    out.print(f"weights for {len(data.examples)} questions written to {out_path}")
    _print(weights)


@ranker_app.command("show")
def ranker_show(path: Path | None = typer.Argument(None, help="A weights file [default: HYPA_RANKER_WEIGHTS, else the shipped weights].")) -> None:
    """Print the ranker's weights and what they were trained on."""
    from core.ranking import DEFAULT_WEIGHTS, RankerWeights, RankerWeightsError

    path = path or load_settings().ranker_weights or DEFAULT_WEIGHTS
    try:
        weights = RankerWeights.load(path)
    except RankerWeightsError as exc:
        fail(str(exc))
    out.print(f"{path}: {weights.trained_on}")
    _print(weights)


def _print(weights) -> None:  # noqa: ANN001 - core.ranking.RankerWeights
    from core.ranking import FEATURES

    table = Table("feature", "weight")
    for name, w in zip(FEATURES, weights.weights):
        table.add_row(name, f"{w:+.3f}")
    out.print(table)
