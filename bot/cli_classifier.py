"""`hypa classifier ...`: train, evaluate and apply the query-complexity classifier.

Registered in bot/cli.py with `app.add_typer(classifier_app, name="classifier")`.
"""
from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

# First: bot.cli_common sets the offline environment before anything imports Hugging Face code.
from bot.cli_common import command_group, err, fail as _fail, load_settings as _settings, out  # isort: skip

import typer
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from bot.settings import Settings

classifier_app = command_group(
    help="Query-complexity classifier (0 = one piece of context, 1 = two, 2 = three or more).",
    no_args_is_help=True,
)



def _class_list(classes: str) -> list[int]:
    value = classes.strip().lower()
    if value == "both":
        return [3, 2]
    if value in ("2", "3"):
        return [int(value)]
    _fail(f"--classes must be 2, 3 or both, got {classes!r}")
    return []


def _train_csv(settings: Settings, override: Path | None) -> Path:
    from core.complexity import DEFAULT_TRAIN_CSV

    path = override or settings.classifier_train_csv or DEFAULT_TRAIN_CSV
    path = Path(path)
    if not path.is_file():
        _fail(f"training CSV {path} does not exist (set HYPA_CLASSIFIER_TRAIN_CSV or pass --csv)")
    return path


class _LazyEmbed:
    """Loads the embedding model only if an embed-lr classifier actually needs a vector."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._embedder = None

    @property
    def embedder(self):
        if self._embedder is None:
            from bot.wiring import make_embedder

            self._embedder = make_embedder(self._settings)
        return self._embedder

    def __call__(self, texts):
        return self.embedder.embed_queries(list(texts))


def _confusion_text(confusion: list[list[int]]) -> str:
    width = max(len(str(v)) for row in confusion for v in row)
    return "\n".join(" ".join(str(v).rjust(width) for v in row) for row in confusion)


def _metrics_table(title: str, rows, chosen: str | None = None) -> Table:
    table = Table(title=title, show_lines=True)
    for column in ("kind", "macro P", "macro R", "macro F1", "accuracy", "confusion (rows = true)", "ms/question", "train s"):
        table.add_column(column, justify="left" if column in ("kind", "confusion (rows = true)") else "right")
    for m in rows:
        name = m.kind + (" [bold green]✓ saved[/]" if m.kind == chosen else "")
        if m.needs_vector:
            name += "\n[dim](given the query vector)[/]"
        table.add_row(
            name,
            f"{m.macro_precision:.4f}",
            f"{m.macro_recall:.4f}",
            f"{m.macro_f1:.4f}",
            f"{m.accuracy:.4f}",
            _confusion_text(m.confusion),
            f"{m.ms_per_question:.3f}",
            f"{m.train_seconds:.1f}" if m.train_seconds else "-",
        )
    return table


@classifier_app.command("train")
def train(
    classes: str = typer.Option("both", "--classes", help="2, 3 or both."),
    kind: str = typer.Option(
        "all", "--kind", help="tfidf-svm, tfidf-lr, embed-lr, tfidf-svm+tokcnn, or all (compare and save the best)."
    ),
    csv_path: Path | None = typer.Option(None, "--csv", help="Training CSV (default: HYPA_CLASSIFIER_TRAIN_CSV)."),
    refit_all: bool = typer.Option(
        False, "--refit-all", help="After scoring, refit the saved model on every row (eval then becomes optimistic)."
    ),
) -> None:
    """Train on the training groups, compare kinds on the noisy variants of held-out groups, save the best."""
    from core.complexity import KINDS, ComplexityClassifier, choose_best, classifier_dir
    from core.errors import TokenStatesError

    settings = _settings()
    class_list = _class_list(classes)
    kinds = list(KINDS) if kind == "all" else [kind]
    unknown = [k for k in kinds if k not in KINDS]
    if unknown:
        _fail(f"unknown kind {unknown[0]!r}; known: {', '.join(KINDS)} or all")
    path = _train_csv(settings, csv_path)
    embed = _LazyEmbed(settings)
    cache_dir = Path(settings.data_dir) / "classifier"

    for n_classes in class_list:
        results = []
        models = {}
        with Progress(
            SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn(), console=err
        ) as progress:
            overall = progress.add_task(f"{n_classes}-class: training {len(kinds)} kind(s)", total=len(kinds))
            for k in kinds:
                step = progress.add_task(f"  {k}: loading data", total=None)

                def say(message: str, _task=step, _kind=k) -> None:
                    progress.update(_task, description=f"  {_kind}: {message}")

                try:
                    model, metrics = ComplexityClassifier.train(
                        path,
                        n_classes,
                        k,
                        embed=embed if k == "embed-lr" else None,
                        embed_model_id=embed.embedder.model_id if k == "embed-lr" else "",
                        embeddings_cache=cache_dir,
                        refit_all=refit_all,
                        progress=say,
                    )
                except (ValueError, TokenStatesError) as exc:
                    _fail(f"{k}: {exc}")
                progress.update(step, description=f"  {k}: done (macro-F1 {metrics.macro_f1:.4f})", total=1, completed=1)
                progress.advance(overall)
                results.append(metrics)
                models[k] = model
        best = choose_best(results)
        folder = models[best.kind].save(classifier_dir(settings.data_dir, n_classes))
        comparison = folder.parent / f"comparison-{n_classes}class.json"
        comparison.write_text(json.dumps([m.to_dict() for m in results], indent=2), encoding="utf-8")
        out.print(
            _metrics_table(
                f"{n_classes}-class, {results[0].n_eval} {results[0].eval_on}, trained on {results[0].n_train} rows",
                results,
                chosen=best.kind,
            )
        )
        for m in results:
            if m.notes:
                out.print(f"[dim]{m.kind}: {m.notes}[/]")
        out.print(f"saved [bold]{best.kind}[/] to {folder} (comparison: {comparison})\n")


@classifier_app.command("eval")
def evaluate(
    classes: str = typer.Option("both", "--classes", help="2, 3 or both."),
    csv_path: Path | None = typer.Option(None, "--csv", help="CSV to score (default: the training CSV)."),
) -> None:
    """Score the saved classifier on the group-held-out noisy split it was validated on."""
    from core.complexity import classifier_dir, evaluate_artifact, load_classifier
    from core.errors import ClassifierArtifactError

    settings = _settings()
    path = _train_csv(settings, csv_path)
    for n_classes in _class_list(classes):
        folder = classifier_dir(settings.data_dir, n_classes)
        if not (folder / "meta.json").is_file():
            _fail(f"no {n_classes}-class classifier at {folder}: run `hypa classifier train --classes {n_classes}`")
        try:
            model = load_classifier(folder, embed=_LazyEmbed(settings))
        except ClassifierArtifactError as exc:
            _fail(str(exc))
        metrics = evaluate_artifact(model, path)
        out.print(
            _metrics_table(f"{n_classes}-class saved artifact ({model.kind}), {metrics.n_eval} {metrics.eval_on}", [metrics])
        )
        if metrics.notes:
            out.print(f"[yellow]note:[/] {metrics.notes}")


@classifier_app.command("predict")
def predict(
    in_path: Path = typer.Option(..., "--in", help="CSV with a `question` column."),
    out_path: Path = typer.Option(..., "--out", help="Where to write the rows with a `label` column added."),
    classes: int = typer.Option(3, "--classes", help="2 or 3."),
) -> None:
    """Label every question of a CSV (0 = one piece of context, 1 = two, 2 = three or more)."""
    from bot.configs import classifier_config
    from core.complexity import classifier_dir, ensure_classifier, load_classifier
    from core.errors import ClassifierArtifactError

    if classes not in (2, 3):
        _fail(f"--classes must be 2 or 3, got {classes}")
    if not in_path.is_file():
        _fail(f"{in_path} does not exist")
    with in_path.open(encoding="utf-8-sig", newline="") as handle:
        reader = csv.DictReader(handle)
        fields = list(reader.fieldnames or [])
        if "question" not in fields:
            _fail(f"{in_path} has no `question` column (columns: {', '.join(fields) or 'none'})")
        rows = list(reader)

    settings = _settings()
    embed = _LazyEmbed(settings)
    folder = classifier_dir(settings.data_dir, classes)
    try:
        model = load_classifier(folder, embed=embed) if (folder / "meta.json").is_file() else None
    except ClassifierArtifactError as exc:
        err.print(f"[yellow]warning:[/] {exc}")
        model = None
    if model is None:
        model = ensure_classifier(classifier_config(settings), classes, embed=embed)
    if model is None:
        _fail(f"no {classes}-class classifier and no training CSV: run `hypa classifier train` first")

    if "label" in fields:
        err.print(f"[yellow]warning:[/] {in_path} already has a `label` column; it is replaced by the predictions")
    else:
        fields.append("label")
    questions = [(row.get("question") or "").strip() for row in rows]
    labels = model.predict_many(questions)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    with out_path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=fields, extrasaction="ignore")
        writer.writeheader()
        for row, label in zip(rows, labels):
            row["label"] = "" if not row.get("question", "").strip() else str(label)
            writer.writerow(row)
    counts = {label: labels.count(label) for label in model.labels}
    err.print(
        f"labelled {len(rows)} question(s) with the {classes}-class {model.kind} classifier -> {out_path} "
        f"(counts {counts})"
    )


if __name__ == "__main__":  # pragma: no cover
    classifier_app(sys.argv[1:])
