"""`hypa ranker train|show`: the learned models of the offline engine (core/linear.py): which
provisions to read (core/ranking.py) and which sentences to quote (core/extractive.py)."""
from __future__ import annotations

from pathlib import Path

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from bot.cli_common import command_group, err, fail, load_settings, out

ranker_app = command_group(help="Train and inspect the offline engine's ranking models.", no_args_is_help=True)


@ranker_app.command("train")
def ranker_train(
    questions: list[Path] = typer.Argument(
        ...,
        help="User-style question files (JSONL with question, collection, evidence), "
        "e.g. tests/data/user_questions/*_train.jsonl.",
    ),
    out_path: Path = typer.Option(..., "--out", "-o", help="Where to write the weights (JSON)."),
    l2: float = typer.Option(1e-3, "--l2", min=0.0, help="L2 penalty on the weights."),
    extend: Path | None = typer.Option(
        None, "--extend",
        help="A weights file to extend: its weights are kept and only features it has no weight for are "
        "fitted (a new signal added without moving how everything else is ranked).",
    ),
) -> None:
    """Learn which provisions to read and which sentences to quote from questions with evidence.

    Every question is planned, embedded and ranked exactly as `hypa ask` does; each collection the
    questions name must be in the index. The provision model is fitted first; the sentence model is
    then fitted on what the new provision model retrieves. Answer with the result:
    HYPA_RANKER_WEIGHTS=PATH.
    """
    import numpy as np

    from bot.wiring import Components
    from core.errors import ModelWeightsError
    from core.extractive import SENTENCE_FEATURES
    from core.followup import asking_part
    from core.linear import LinearModel, known_weights, save_models
    from core.ranking import FEATURES
    from core.ranking_train import fit_model, holds_span, read_training_questions, shares_span

    for path in questions:
        if not path.is_file():
            fail(f"no such file: {path}")
    try:
        rows = read_training_questions(questions)
    except (ValueError, KeyError) as exc:
        fail(f"cannot read the questions: {exc}")
    if not rows:
        fail("no answerable question with evidence in those files")
    keep: dict[str, dict[str, float]] = {"provisions": {}, "sentences": {}}
    if extend is not None:
        try:
            keep = {name: known_weights(extend, name) for name in keep}
        except ModelWeightsError as exc:
            fail(str(exc))
    settings = load_settings()
    blank = {"provisions": LinearModel(FEATURES, np.zeros(len(FEATURES), dtype=np.float32)),
             "sentences": LinearModel(SENTENCE_FEATURES, np.zeros(len(SENTENCE_FEATURES), dtype=np.float32))}
    components = Components(settings, overrides={"models": blank})
    missing = sorted({q.collection for q in rows} - set(components.index.collections()))
    if missing:
        fail(f"collection(s) {', '.join(missing)} not in the index; build them first (`hypa index build NAME`)")

    def provision_rows(question, history, collection):  # noqa: ANN001, ANN202
        return components.pipeline.provision_features(question, history, collection=collection)

    with _bar() as bar:
        task = bar.add_task("provisions", total=len(rows))
        provisions, provision_data = fit_model(
            FEATURES, rows, provision_rows, holds_span, l2, lambda: bar.advance(task), keep=keep["provisions"]
        )
    # The sentences are learned on what the new provision model retrieves.
    trained = Components(settings, overrides={"models": {**blank, "provisions": provisions}})
    pipeline, generator = trained.pipeline, trained.generator

    def sentence_rows(question, history, collection):  # noqa: ANN001, ANN202
        found = pipeline.retrieve(question, history, collection=collection)
        asking = asking_part(found.plan.question, history)
        candidates = generator.candidates(found.plan.question, found.contexts, found.query_vector, asking)
        return candidates.features, [s.text(candidates.chunks) for s in candidates.sentences]

    with _bar() as bar:
        task = bar.add_task("sentences", total=len(rows))
        sentences, sentence_data = fit_model(
            SENTENCE_FEATURES, rows, sentence_rows, shares_span, l2, lambda: bar.advance(task), keep=keep["sentences"]
        )
    kept = f"; extends {extend.name} (only {_new_features(keep)} fitted)" if extend is not None else ""
    note = (
        f"{len(rows)} questions from {', '.join(p.name for p in questions)}; l2 {l2:g}{kept}; provisions: "
        f"{len(provision_data.examples)} used, sentences: {len(sentence_data.examples)} used (the others' "
        "evidence was not among what they retrieved)"
    )
    out_path.parent.mkdir(parents=True, exist_ok=True)
    save_models(out_path, {"provisions": provisions, "sentences": sentences}, note)
    out.print(f"written to {out_path}: {note}")
    _print({"provisions": provisions, "sentences": sentences})


@ranker_app.command("show")
def ranker_show(
    path: Path | None = typer.Argument(None, help="A weights file [default: HYPA_RANKER_WEIGHTS, else the shipped weights]."),
) -> None:
    """Print the models' weights and what they were trained on."""
    from core.errors import ModelWeightsError
    from core.extractive import SENTENCE_FEATURES
    from core.linear import DEFAULT_WEIGHTS_FILE, load_model, trained_on
    from core.ranking import FEATURES

    path = path or load_settings().ranker_weights or DEFAULT_WEIGHTS_FILE
    try:
        models = {
            "provisions": load_model(path, "provisions", FEATURES),
            "sentences": load_model(path, "sentences", SENTENCE_FEATURES),
        }
        note = trained_on(path)
    except ModelWeightsError as exc:
        fail(str(exc))
    out.print(f"{path}: {note}")
    _print(models)


def _new_features(keep: dict[str, dict[str, float]]) -> str:
    from core.extractive import SENTENCE_FEATURES
    from core.ranking import FEATURES

    new = [f for f in FEATURES if f not in keep["provisions"]] + [f for f in SENTENCE_FEATURES if f not in keep["sentences"]]
    return ", ".join(new) or "nothing"


def _bar() -> Progress:
    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=err)


def _print(models) -> None:  # noqa: ANN001 - {name: core.linear.LinearModel}
    for name, model in models.items():
        table = Table("feature", "weight", title=name)
        for feature, w in zip(model.features, model.weights):
            table.add_row(feature, f"{w:+.3f}")
        out.print(table)
