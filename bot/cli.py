"""The `hypa` command line: corpora, ingestion, questions, chat, evaluation."""
from __future__ import annotations

import getpass
import json
import sys
from pathlib import Path
from typing import Optional

# First: bot.cli_common sets the offline environment before anything imports Hugging Face code.
from bot.cli_common import SetupErrorsAsMessages, command_group, err, fail as _fail, load_settings as _settings, out  # isort: skip

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from bot.cli_classifier import classifier_app
from bot.cli_feedback import feedback_app
from bot.cli_kg import kg_app
from bot.cli_ranker import ranker_app
from bot.cli_serve import serve_app
from bot.settings import Settings

app = command_group(
    help="hypa: cited answers about regulations (NYC Local Law 144, the EU AI Act, or your own files).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    cls=SetupErrorsAsMessages,
)
corpus_app = command_group(help="Official regulation files: list the manifest, fetch and verify them.", no_args_is_help=True)
index_app = command_group(help="Build and inspect the embedded hybrid index.", no_args_is_help=True)
eval_app = command_group(help="Run a question set through the pipeline and score it.", no_args_is_help=True)
app.add_typer(corpus_app, name="corpus")
app.add_typer(index_app, name="index")
app.add_typer(eval_app, name="eval")
app.add_typer(classifier_app, name="classifier")
app.add_typer(kg_app, name="kg")
app.add_typer(ranker_app, name="ranker")
app.add_typer(serve_app, name="serve")
app.add_typer(feedback_app, name="feedback")


SAMPLE_QUESTIONS = (
    "Do I need a bias audit before using an automated employment decision tool?",
    "How many business days before using an AEDT must candidates be notified?",
    "What are the civil penalties for violating the law?",
)


def _components(settings: Settings, **overrides):
    from bot.wiring import Components

    return Components(settings, overrides={k: v for k, v in overrides.items() if v is not None})


def _progress() -> Progress:
    return Progress(
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        transient=False,
    )


# --- corpus -------------------------------------------------------------------------------------


@corpus_app.command("list")
def corpus_list() -> None:
    """List the corpora the manifest knows, with their official sources."""
    from bot.corpus import load_manifest

    table = Table("corpus", "file", "publisher", "official source")
    for name, corpus in load_manifest().corpora.items():
        for f in corpus.files:
            table.add_row(name, f.name, f.publisher, f.source_page)
    out.print(table)


@corpus_app.command("fetch")
def corpus_fetch(
    name: str = typer.Argument(..., help="Corpus name from the manifest: ll144 or eu-ai-act."),
    no_download: bool = typer.Option(False, "--no-download", help="Use only the local mirror."),
) -> None:
    """Copy a corpus from the local mirror (HYPA_CORPUS_MIRROR) or download it; verify its sha256."""
    from bot.corpus import CorpusError, fetch_corpus

    settings = _settings()
    try:
        files = fetch_corpus(name, settings.corpus_dir, settings.corpus_mirror, allow_download=not no_download)
    except CorpusError as exc:
        _fail(str(exc))
    for f in files:
        out.print(f"[green]ok[/] {f.path} ({f.origin}, sha256 verified)")


# --- ingestion ----------------------------------------------------------------------------------


def _ingest(components, paths: list[Path], collection: str) -> int:
    """Ingest files with a progress bar; returns the number of failures."""
    from core.ingestion import expand_paths

    files = expand_paths(paths)
    missing = [p for p in files if not p.exists()]
    if missing:
        _fail("no such file: " + ", ".join(map(str, missing)))
    if not files:
        _fail("no supported files (.pdf .md .txt .html) under " + ", ".join(map(str, paths)))
    failures = 0
    with _progress() as progress:
        task = progress.add_task(f"ingesting into '{collection}'", total=len(files))
        for path in files:
            progress.update(task, description=f"ingesting {path.name}")
            outcome = components.ingest(path, collection, update_graph=False)
            progress.advance(task)
            if outcome.status == "failed":
                failures += 1
                # A file error leaves the index as it was; a backend error says itself what is left.
                kept = "" if outcome.error.startswith("index backend:") else " (index unchanged)"
                err.print(f"[red]failed[/] {path}: {outcome.error}{kept}")
            else:
                err.print(f"[green]{outcome.status}[/] {path.name}: {outcome.chunks or 'no new'} chunks")
        if failures < len(files):  # one graph update for the whole batch (a no-op when nothing changed)
            progress.update(task, description="updating the knowledge graph")
            components.update_knowledge_graph(collection)
    return failures


@app.command()
def ingest(
    paths: list[Path] = typer.Argument(..., help="Files or directories (.pdf, .md, .txt, .html)."),
    collection: str = typer.Option(..., "--collection", "-c", help="Collection to add the documents to."),
) -> None:
    """Chunk regulations along their legal structure and add them to the index.

    Re-ingesting an unchanged file does nothing; a changed file replaces its old chunks.
    """
    settings = _settings()
    failures = _ingest(_components(settings), paths, collection)
    if failures:
        raise typer.Exit(1)


@index_app.command("build")
def index_build(name: str = typer.Argument(..., help="Manifest corpus: ll144 or eu-ai-act.")) -> None:
    """Fetch a manifest corpus if needed and ingest it into the collection of the same name (idempotent)."""
    settings = _settings()
    _build_corpus_index(_components(settings), name)


def _build_corpus_index(components, name: str) -> None:
    from bot.corpus import CorpusError, fetch_corpus

    settings = components.settings
    try:
        files = fetch_corpus(name, settings.corpus_dir, settings.corpus_mirror)
    except CorpusError as exc:
        _fail(str(exc))
    if _ingest(components, [f.path for f in files], name):
        raise typer.Exit(1)


@index_app.command("list")
def index_list() -> None:
    """Show the collections in the index and their sizes."""
    settings = _settings()
    components = _components(settings)
    names = _index_collections(components)
    index = components.index
    table = Table("collection", "chunks", "documents")
    for name in names:
        chunks = index.chunks(name)
        table.add_row(name, str(len(chunks)), str(len({c.doc_id for c in chunks})))
    out.print(table)


@index_app.command("migrate")
def index_migrate(
    to: str = typer.Option(..., "--to", help="Target backend: weaviate (WEAVIATE_URL, WEAVIATE_GRPC_PORT, WEAVIATE_API_KEY)."),
    collection: Optional[str] = typer.Option(None, "--collection", "-c", help="Copy only this collection (default: all)."),
) -> None:
    """Copy the embedded index (chunks and their vectors, no re-embedding) into Weaviate; resumable."""
    from weaviate.exceptions import WeaviateBaseError

    from storage.embedded import EmbeddedIndex
    from storage.weaviate_index import (
        MigrationError,
        WeaviateIndex,
        WeaviateUnavailable,
        WeaviateWriteError,
        copy_collection,
        tenant_name,
    )

    if to != "weaviate":
        _fail(f"--to must be weaviate (the only other backend), got {to!r}")
    settings = _settings()
    source = EmbeddedIndex(settings.index_dir, candidates=settings.candidates)
    known = source.collections()
    if collection is not None and collection not in known:
        _fail(f"collection '{collection}' is not in the embedded index at {settings.index_dir} ({', '.join(known) or 'empty'})")
    names = [collection] if collection else known
    if not names:
        _fail(f"the embedded index at {settings.index_dir} is empty: nothing to migrate")
    if settings.weaviate_multi_tenancy:
        for name in names:  # checked before any copying, not half-way through
            try:
                tenant_name(name)
            except ValueError as exc:
                _fail(str(exc))
    try:
        target = WeaviateIndex.from_settings(settings, embedder=_components(settings).embedder)
    except WeaviateUnavailable as exc:
        _fail(str(exc))
    try:
        target.ensure_schema()  # connects: an unreachable server fails here, before any work
        with _progress() as progress:
            for name in names:
                task = progress.add_task(f"copying '{name}'", total=len(source.chunks(name)))
                outcome = copy_collection(source, target, name, on_chunks=lambda n, t=task: progress.advance(t, n))
                err.print(
                    f"[green]ok[/] {name}: {outcome.documents_copied} document(s), {outcome.chunks_copied} chunks "
                    f"copied; {outcome.documents_unchanged} already up to date"
                )
    except WeaviateUnavailable as exc:
        _fail(str(exc))
    except (WeaviateWriteError, MigrationError, WeaviateBaseError) as exc:
        _fail(f"migration stopped (run the command again to resume): {exc}")
    finally:
        target.close()


# --- questions ----------------------------------------------------------------------------------


CONFIG_HELP = (
    "Retrieval parameters: default (HYPA_TOP_K, no rewrites), fixed-k3, fixed-k5, fixed-k7, fixed-k10, "
    "pa-2class, pa-3class (parameter-adaptive: a complexity classifier picks top-k and rewrites), "
    "hypa-2class, hypa-3class, fixed-k7-kg (the same plus the knowledge graph), pa-2class-budget (the label "
    "sets a token budget; ablations fixed-b1200, fixed-k7-novelty, hypa-2class-budget) [default: HYPA_RETRIEVAL_CONFIG]."
)


def _checked_config(name: Optional[str]) -> Optional[str]:
    """The config name if it exists (clear error listing the known ones otherwise)."""
    if name is None or name == "default":
        return name
    from core.params import ConfigError, load_configs

    try:
        known = load_configs()
    except ConfigError as exc:
        _fail(str(exc))
    if name not in known:
        _fail(f"unknown --config {name!r}; available: default, {', '.join(sorted(known))}")
    return name


def _print_result(result, as_json: bool) -> None:
    if as_json:
        sys.stdout.write(json.dumps(result.to_record(), ensure_ascii=False) + "\n")
        return
    from adapters.terminal import render_result

    render_result(out, result)


def _index_collections(components) -> list[str]:
    """The index's collections, or a one-line error when the index backend cannot be reached."""
    from storage.weaviate_index import WeaviateUnavailable  # no weaviate import: cheap

    try:
        return components.index.collections()
    except WeaviateUnavailable as exc:
        _fail(f"{exc} (HYPA_INDEX=weaviate)")
    except Exception as exc:
        if components.settings.index_backend != "weaviate":
            raise
        from weaviate.exceptions import WeaviateBaseError

        if not isinstance(exc, WeaviateBaseError):
            raise
        # Reached, but it failed the request (wrong API key, permissions, server error): say so, no traceback.
        _fail(f"Weaviate answered with an error (HYPA_INDEX=weaviate): {exc}")


def _check_collection(components, collection: str) -> None:
    known = _index_collections(components)
    if collection not in known:
        from bot.wiring import collection_hint

        _fail(
            f"collection '{collection}' is not in the index ({', '.join(known) or 'the index is empty'}); "
            f"run {collection_hint(collection)}"
        )


@app.command()
def ask(
    question: str = typer.Argument(..., help="The question, in quotes."),
    collection: Optional[str] = typer.Option(None, "--collection", "-c", help="Collection to search [default: HYPA_COLLECTION]."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object (answer, refused, citations, contexts, ...)."),
    top_k: Optional[int] = typer.Option(None, "--top-k", min=1, max=100, help="Chunks given to the generator."),
    fusion: Optional[str] = typer.Option(None, "--fusion", help="rankedFusion or relativeScoreFusion."),
    alpha: Optional[float] = typer.Option(None, "--alpha", min=0.0, max=1.0, help="0 = BM25 only, 1 = vectors only."),
    config: Optional[str] = typer.Option(None, "--config", help=CONFIG_HELP),
) -> None:
    """Answer one question with cited provisions."""
    settings = _settings()
    if fusion not in (None, "rankedFusion", "relativeScoreFusion"):
        _fail("--fusion must be rankedFusion or relativeScoreFusion")
    components = _components(settings, top_k=top_k, fusion=fusion, alpha=alpha, config=_checked_config(config))
    collection = collection or settings.collection
    _check_collection(components, collection)
    _print_result(components.pipeline.answer(question, collection=collection), as_json)


def _local_user() -> str:
    """Who rates answers in `hypa chat` (the login name; containers may have none)."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "local"


@app.command()
def chat(
    collection: Optional[str] = typer.Option(None, "--collection", "-c", help="Collection to search."),
) -> None:
    """Interactive chat in the terminal; follow-up questions use the conversation so far."""
    from adapters.terminal import run_chat

    settings = _settings()
    components = _components(settings)
    collection = collection or settings.collection
    _check_collection(components, collection)
    run_chat(out, components.conversation(collection=collection), user=_local_user())


@app.command()
def demo() -> None:
    """Fetch LL144 if needed, build its index, and answer three sample questions."""
    settings = _settings()
    components = _components(settings)
    _build_corpus_index(components, "ll144")
    for q in SAMPLE_QUESTIONS:
        out.rule(f"[bold]{q}")
        _print_result(components.pipeline.answer(q, collection="ll144"), as_json=False)


# --- evaluation ---------------------------------------------------------------------------------


@eval_app.command("run")
def eval_run(
    dataset: Path = typer.Argument(..., help="JSONL with id, question, optional conversation_history."),
    out_path: Path = typer.Option(..., "--out", "-o", help="Where to write one JSON result per row."),
    collection: Optional[str] = typer.Option(None, "--collection", "-c", help="Collection to search."),
    config: Optional[str] = typer.Option(None, "--config", help=CONFIG_HELP),
    top_k: Optional[int] = typer.Option(None, "--top-k", min=1, max=100, help="Fixed top-k (with --config default)."),
    no_rewrite: bool = typer.Option(False, "--no-rewrite", help="Search the question exactly as asked (ablation)."),
) -> None:
    """Answer every row of DATASET with the same pipeline the bots use (reference fields are never read)."""
    from core.eval import DatasetError, run_eval

    if not dataset.is_file():
        _fail(f"no such dataset: {dataset}")
    settings = _settings()
    components = _components(settings, top_k=top_k, config=_checked_config(config), no_rewrite=no_rewrite or None)
    collection = collection or settings.collection
    _check_collection(components, collection)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    # Load the model and the collection before the clock starts: latency is per question, not start-up.
    components.embedder.embed_queries(["warm up"])
    components.term_stats(collection)
    try:
        summary = run_eval(dataset, out_path, components.pipeline, collection, progress=True)
    except DatasetError as exc:
        _fail(str(exc))
    out.print_json(data=summary.to_dict())


@eval_app.command("report")
def eval_report(
    results: Path = typer.Argument(..., help="Output of `hypa eval run`."),
    gold: Path = typer.Option(..., "--gold", help="The dataset with reference answers."),
    scope_review: Optional[Path] = typer.Option(
        None, "--scope-review", help="TOML of corrected out-of-scope labels [default: the LL144 dev review when --gold is ll144_dev.jsonl]."
    ),
    markdown: bool = typer.Option(False, "--markdown", help="Print Markdown tables (for docs/RESULTS.md)."),
    no_similarity: bool = typer.Option(False, "--no-similarity", help="Skip answer similarity (no model load)."),
) -> None:
    """Score results against the gold set.

    An authors'-style set (reference answers) gets context recall, answer similarity, refusals,
    citations, tokens and latency; a user-style set (rows with `answerable`, `evidence` and
    `must_include`) gets provision recall, fact recall, cited, false refusals, unanswerable refused
    and context tokens, overall and per kind.
    """
    from core.eval import DEFAULT_SCOPE_REVIEW, build_report, render_markdown, render_rich
    from core.eval.report import read_results
    from core.eval.run import DatasetError
    from core.eval.user_style import build_user_report, is_user_style, render_user_markdown, render_user_rich

    for p in (results, gold):
        if not p.is_file():
            _fail(f"no such file: {p}")
    try:
        user_style = is_user_style(read_results(gold))
        if user_style:
            user_report = build_user_report(results, gold)
    except DatasetError as exc:
        _fail(str(exc))
    if user_style:
        if markdown:
            sys.stdout.write(render_user_markdown(user_report) + "\n")
        else:
            render_user_rich(user_report, out)
        return
    if scope_review is None and gold.name == "ll144_dev.jsonl":
        scope_review = DEFAULT_SCOPE_REVIEW
    embed = None
    if not no_similarity:
        embed = _components(_settings()).embedder.embed_passages
    try:
        report = build_report(results, gold, scope_review, embed)
    except (DatasetError, ValueError) as exc:
        _fail(str(exc))
    if markdown:
        sys.stdout.write(render_markdown(report) + "\n")
    else:
        render_rich(report, out)


@eval_app.command("split")
def eval_split(
    dataset: Path = typer.Argument(..., help="A JSONL question set (any style)."),
    out_dir: Path = typer.Option(Path("data/eval_split"), "--out-dir", help="Where the two parts are written."),
) -> None:
    """Split DATASET into a part to study and a part only to measure (NAME.study.jsonl, NAME.measure.jsonl).

    The split is fixed by a hash of each question's id, so it never changes between runs; a
    follow-up stays with the question it follows. Tune on the study part, report both.
    """
    from core.eval.run import DatasetError
    from core.eval.split import split_dataset

    if not dataset.is_file():
        _fail(f"no such dataset: {dataset}")
    try:
        summary = split_dataset(dataset, out_dir)
    except DatasetError as exc:
        _fail(str(exc))
    out.print(f"study:   {summary.rows['study']:4d} rows -> {summary.study}")
    out.print(f"measure: {summary.rows['measure']:4d} rows -> {summary.measure}")


def main() -> None:  # pragma: no cover - console entry point
    app()
