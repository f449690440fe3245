"""The `hypa` command line: corpora, ingestion, questions, chat, evaluation."""
from __future__ import annotations

import getpass
import json
import sys
from pathlib import Path
from typing import Optional, Sequence

# First: bot.cli_common sets the offline environment before anything imports Hugging Face code.
from bot.cli_common import SetupErrorsAsMessages, command_group, err, fail as _fail, load_settings as _settings, out  # isort: skip

import typer
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table

from bot.cli_classifier import classifier_app
from bot.cli_feedback import feedback_app
from bot.cli_glossary import glossary_app
from bot.cli_kg import kg_app
from bot.cli_precedents import precedents_app
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
index_app = command_group(help="Build, inspect and edit the index: collections and their documents.", no_args_is_help=True)
eval_app = command_group(help="Run a question set through the pipeline and score it.", no_args_is_help=True)
app.add_typer(corpus_app, name="corpus")
app.add_typer(index_app, name="index")
app.add_typer(eval_app, name="eval")
app.add_typer(classifier_app, name="classifier")
app.add_typer(kg_app, name="kg")
app.add_typer(ranker_app, name="ranker")
app.add_typer(glossary_app, name="glossary")
app.add_typer(precedents_app, name="precedents")
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


class _FileProgress:
    """core.ingestion.IngestProgress on a rich progress bar: one task for the file being ingested,
    restarted at each stage (reading, chunking, embedding chunks, embedding sentences)."""

    def __init__(self, progress: Progress, name: str) -> None:
        self.progress = progress
        self.name = name
        self.current = ""
        self.task = progress.add_task(escape(name), total=None)

    def stage(self, name: str, total: int | None = None) -> None:
        # A new task rather than a reset: a stage without a total (reading, chunking) shows a pulsing bar.
        self.current = name
        self.progress.remove_task(self.task)
        self.task = self.progress.add_task(escape(f"{self.name}: {name}"), total=total)
        if not self.progress.console.is_terminal:  # a log or a pipe gets no live bar: one line per stage
            size = f" ({total})" if total is not None else ""
            self.progress.console.print(escape(f"{self.name}: {name}{size}"), soft_wrap=True)

    def advance(self, n: int) -> None:
        self.progress.advance(self.task, n)

    def close(self) -> None:
        self.progress.remove_task(self.task)


def _say_skipped(selection, paths: list[Path]) -> None:
    """Name the files a directory ingest leaves out (and count the hidden ones)."""
    from core.ingestion import SUPPORTED_SUFFIXES

    if selection.skipped:
        roots = [p for p in paths if p.is_dir()]

        def shown(f: Path) -> str:
            root = next((r for r in roots if f.is_relative_to(r)), None)
            return str(f.relative_to(root)) if root else str(f)

        names = [shown(f) for f in selection.skipped]
        listed = ", ".join(names[:10]) + (f" and {len(names) - 10} more" if len(names) > 10 else "")
        err.print(
            f"[yellow]skipped[/] {len(names)} file(s) of a type hypa cannot read "
            f"(it reads {' '.join(SUPPORTED_SUFFIXES)}): {escape(listed)}",
            soft_wrap=True,
        )
    if selection.hidden:
        err.print(f"[dim]{selection.hidden} hidden file(s) (names starting with '.') not looked at[/]", soft_wrap=True)


def _say_outcome(outcome) -> None:
    """One line per file (never wrapped: a path or a message may be long)."""
    name = escape(outcome.path.name)
    note = f" ({escape(outcome.note)})" if outcome.note else ""
    if outcome.status == "failed":
        # A file error leaves the index as it was; a backend error says itself what is left.
        kept = "" if outcome.error.startswith("index backend:") else " (index unchanged)"
        err.print(f"[red]failed[/] {escape(str(outcome.path))}: {escape(outcome.error)}{kept}", soft_wrap=True)
    elif outcome.status == "unchanged":
        err.print(f"[green]unchanged[/] {name} as '{escape(outcome.doc_id)}'{note}", soft_wrap=True)
    else:
        err.print(
            f"[green]{outcome.status}[/] {name} as '{escape(outcome.doc_id)}': {outcome.chunks} chunks{note}",
            soft_wrap=True,
        )


def _ingest(
    components, paths: list[Path], collection: str, *, doc_ids: dict[Path, str] | None = None,
    source_url: str | None = None,
) -> int:
    """Ingest files with progress; returns the number of failures. `doc_ids`: explicit ids by file;
    `source_url`: where the citations of the (one) file link to."""
    from core.ingestion import select_files

    selection = select_files(paths)
    files = selection.files
    missing = [p for p in files if not p.exists()]
    if missing:
        _fail("no such file: " + ", ".join(map(str, missing)))
    _say_skipped(selection, paths)
    if not files:
        _fail("no supported files (.pdf .md .txt .html) under " + ", ".join(map(str, paths)))
    doc_ids = doc_ids or {}
    failures = done = 0
    current: _FileProgress | None = None
    try:
        with _progress() as progress:
            overall = progress.add_task(escape(f"ingesting into '{collection}'"), total=len(files))
            for path in files:
                current = _FileProgress(progress, path.name)
                outcome = components.ingest(
                    path, collection, update_graph=False, doc_id=doc_ids.get(path), progress=current,
                    source_url=source_url,
                )
                current.close()
                progress.advance(overall)
                done += 1
                failures += outcome.status == "failed"
                _say_outcome(outcome)
            if failures < len(files):  # one graph update for the whole batch (a no-op when nothing changed)
                progress.update(overall, description="updating the knowledge graph")
                components.update_knowledge_graph(collection)
    except KeyboardInterrupt:
        _say_stopped(current, done, len(files))
        raise typer.Exit(130) from None
    return failures


def _say_stopped(current: _FileProgress | None, done: int, total: int) -> None:
    if current is None or done == total:
        where = "while updating the knowledge graph; `hypa kg build` or the next ingest redoes it"
    elif current.current == "embedding sentences":
        where = (f"{current.name} is in the index, but not all its sentences are embedded yet: "
                 "ingest it again to finish (nothing else is redone)")
    else:
        where = f"{current.name} was not ingested: the index is as it was before it"
    err.print(f"[yellow]stopped[/] after {done} of {total} file(s); {escape(where)}", soft_wrap=True)


@app.command()
def ingest(
    paths: list[Path] = typer.Argument(..., help="Files or directories (.pdf, .md, .txt, .html)."),
    collection: str = typer.Option(..., "--collection", "-c", help="Collection to add the documents to."),
    doc_id: Optional[str] = typer.Option(
        None, "--as", help="Put one file under this document id, replacing the document that has it."
    ),
    source_url: Optional[str] = typer.Option(
        None, "--source-url",
        help="Where citations of this one file link to: a URL, or a pattern with {section} {article} {recital} "
        "{annex} {page} (e.g. https://example.com/policy.pdf#page={page}); \"\" removes the link.",
    ),
) -> None:
    """Chunk regulations along their legal structure and add them to the index.

    A document is its file: ingesting the same file again updates it (unchanged content is skipped).
    Its id is the file name (`rules.md` -> `rules`); a different file with the same name is added
    beside it with its folder in the id (`b-rules`), and the output says so. `hypa index documents`
    lists what a collection holds; `hypa index remove` takes a document out. `--source-url` makes
    the document's citations links to its official text (kept until given again).
    """
    from core.errors import InvalidDocumentId, LinkPatternError
    from core.ingestion import check_doc_id
    from core.links import check_pattern

    settings = _settings()
    explicit: dict[Path, str] = {}
    if doc_id is not None:
        if len(paths) != 1 or paths[0].is_dir():
            _fail("--as takes exactly one file")
        try:
            explicit[paths[0]] = check_doc_id(doc_id)
        except InvalidDocumentId as exc:
            _fail(str(exc))
    if source_url is not None:
        if len(paths) != 1 or paths[0].is_dir():
            _fail("--source-url takes exactly one file (each document has its own address)")
        try:
            source_url = check_pattern(source_url) if source_url.strip() else ""
        except LinkPatternError as exc:
            _fail(str(exc))
    # The first documents of a fresh index are tuned on with the corpora, so a user's own
    # regulations are searched with a model that has read them.
    components = _components_tuned(settings, paths)
    failures = _ingest(components, paths, collection, doc_ids=explicit, source_url=source_url)
    if failures:
        raise typer.Exit(1)


@index_app.command("build")
def index_build(name: str = typer.Argument(..., help="Manifest corpus: ll144 or eu-ai-act.")) -> None:
    """Fetch a manifest corpus if needed and ingest it into the collection of the same name (idempotent).

    On a fresh index the embedding model is first tuned on the manifest corpora (a few minutes; see
    `hypa index tune`; HYPA_TUNE_EMBEDDINGS=false skips it)."""
    settings = _settings()
    _build_corpus_index(_components_tuned(settings), name)


@index_app.command("tune")
def index_tune(
    force: bool = typer.Option(False, "--force", help="Tune again, although the index holds collections "
                               "(they must then be rebuilt: delete the index folder and `hypa index build` again)."),
    include: list[Path] = typer.Option(
        [], "--include", help="Your own regulation files or folders to tune on as well (repeatable)."
    ),
) -> None:
    """Tune the embedding model on the regulations' own text (headings and their sentences, list
    lead-ins and their items) and our training questions, into data/models/tuned-minilm.

    `hypa index build` does this by itself before a fresh index is built, and so does `hypa ingest`
    (with the files it ingests). Every collection must be embedded by the model it is searched with,
    so an index that already holds collections is left alone unless --force.
    """
    settings = _settings()
    if settings.embedding_model:
        _fail(f"HYPA_EMBEDDING_MODEL is set ({settings.embedding_model}): that model is used, not a tuned one")
    collections = _index_collections(_components(settings))
    if collections and not force:
        _fail(f"the index already holds {', '.join(sorted(collections))}, embedded with the current model; "
              "tuning now would make them unsearchable. Use --force, then rebuild them.")
    missing = [str(p) for p in include if not p.exists()]
    if missing:
        _fail(f"no such file or folder to tune on: {', '.join(missing)}")
    _tune_embeddings(settings, include)


def _components_tuned(settings: Settings, documents: Sequence[Path] | None = None):
    """Components, after tuning the embedding model when the index is fresh (bot/embedding_tuning.py).

    `documents`: the user's own files about to be ingested. They are tuned on with the corpora already
    on disk (nothing is downloaded for them), and an ingest goes on with the package's model when
    there is nothing to tune on (ingest then says what is wrong with each file)."""
    from bot.embedding_tuning import should_tune

    components = _components(settings)
    if should_tune(settings, lambda: bool(_index_collections(components))):
        if documents is None:
            _tune_embeddings(settings)
        else:
            _tune_embeddings(settings, documents, download=False, required=False)
        components = _components(settings)  # its embedder is the tuned model now
    return components


def _tune_embeddings(
    settings: Settings, documents: Sequence[Path] = (), *, download: bool = True, required: bool = True
) -> None:
    from bot.corpus import CorpusError
    from bot.embedding_tuning import tune

    err.print("Tuning the embedding model on the regulations' own text (once; HYPA_TUNE_EMBEDDINGS=false skips it)")
    with _progress() as bar:
        task = bar.add_task("tuning the embedding model", total=None)
        try:
            outcome = tune(
                settings,
                progress=lambda done, total: bar.update(task, completed=done, total=total),
                documents=documents,
                download=download,
            )
        except (CorpusError, ValueError) as exc:
            if required:
                _fail(f"cannot tune the embedding model: {exc}")
            err.print(f"[yellow]not tuned[/] ({escape(str(exc))}); the package's embedding model is used")
            return
    for why in outcome.skipped:
        err.print(f"[yellow]not tuned on {why}[/]")
    out.print(f"tuned embedding model written to {settings.tuned_model_dir}: {outcome.record.pairs} pairs from "
              f"{', '.join(outcome.corpora)} and {outcome.questions} training questions")


def _build_corpus_index(components, name: str) -> None:
    from bot.corpus import CorpusError, fetch_corpus
    from core.ingestion import doc_id_for

    settings = components.settings
    try:
        files = fetch_corpus(name, settings.corpus_dir, settings.corpus_mirror)
    except CorpusError as exc:
        _fail(str(exc))
    # The manifest files keep the ids they always had (`ll144-rules`, `euaiact`): the knowledge graph,
    # evaluation records and stored answers refer to them.
    paths = [f.path for f in files]
    if _ingest(components, paths, name, doc_ids={p: doc_id_for(p) for p in paths}):
        raise typer.Exit(1)


@index_app.command("documents")
def index_documents(collection: str = typer.Argument(..., help="The collection to list.")) -> None:
    """List a collection's documents: id, chunks, content hash, when and from which file each was ingested."""
    settings = _settings()
    components = _components(settings)
    _check_collection(components, collection)
    table = Table("document", "chunks", "sha256", "ingested at (UTC)")
    table.add_column("source", overflow="fold")
    table.add_column("citations link to", overflow="fold")
    manifest = _manifest_links().get(collection, {})
    for info in components.index.document_info(collection):
        link = info.source_url
        if not link and info.doc_id in manifest:
            link = f"{manifest[info.doc_id].rules[-1].url} (bot/corpora.toml)"
        table.add_row(
            escape(info.doc_id), str(info.chunks), info.content_hash[:12],
            info.ingested_at.replace("T", " ").removesuffix("Z") or "-", escape(info.source) or "-",
            escape(link) or "-",
        )
    out.print(table)


def _manifest_links() -> dict:
    from bot.corpus import load_manifest, manifest_links

    return manifest_links(load_manifest())


@index_app.command("remove")
def index_remove(
    collection: str = typer.Argument(..., help="The collection to remove documents from."),
    doc_ids: list[str] = typer.Argument(..., help="Document ids, as `hypa index documents` lists them."),
) -> None:
    """Remove documents (their chunks and their record) from a collection."""
    from core.errors import IndexUnavailable, IndexWriteError

    settings = _settings()
    components = _components(settings)
    _check_collection(components, collection)
    held = {info.doc_id: info for info in components.index.document_info(collection)}
    unknown = [d for d in doc_ids if d not in held]
    if unknown:  # checked before anything is removed
        _fail(
            f"no document {', '.join(repr(d) for d in unknown)} in '{collection}' "
            f"(it has: {', '.join(sorted(held)) or 'none'}); `hypa index documents {collection}` lists them"
        )
    for doc_id in dict.fromkeys(doc_ids):
        try:
            components.index.delete_document(collection, doc_id)
        except (IndexUnavailable, IndexWriteError) as exc:
            _fail(f"removing '{doc_id}' failed: {exc}")
        info = held[doc_id]
        source = f"; it came from {info.source}" if info.source else ""
        err.print(f"[green]removed[/] '{escape(doc_id)}' ({info.chunks} chunks{escape(source)})", soft_wrap=True)
    components.update_knowledge_graph(collection)


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
    from bot.configs import weaviate_config
    from core.errors import IndexUnavailable, IndexWriteError, MigrationError, WeaviateUnavailable
    from storage.embedded import EmbeddedIndex
    from storage.weaviate_index import WeaviateIndex, copy_collection, tenant_name

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
        target = WeaviateIndex.from_config(weaviate_config(settings), embedder=_components(settings).embedder)
    except WeaviateUnavailable as exc:
        _fail(str(exc))
    try:
        target.ensure_schema()  # connects: an unreachable server fails here, before any work
        with _progress() as progress:
            for name in names:
                task = progress.add_task(f"copying '{name}'", total=len(source.chunks(name)))

                def copied(n: int, task: TaskID = task) -> None:
                    progress.advance(task, n)

                outcome = copy_collection(source, target, name, on_chunks=copied)
                err.print(
                    f"[green]ok[/] {name}: {outcome.documents_copied} document(s), {outcome.chunks_copied} chunks "
                    f"copied; {outcome.documents_unchanged} already up to date"
                )
    except WeaviateUnavailable as exc:
        _fail(str(exc))
    except (IndexUnavailable, IndexWriteError, MigrationError) as exc:  # reached, but it failed a request
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
    from core.errors import ConfigError
    from core.params import load_configs

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
    """The index's collections, or a one-line error when the index backend cannot serve (unreachable,
    or it failed the request: wrong API key, permissions, a server error)."""
    from core.errors import IndexUnavailable

    try:
        return components.index.collections()
    except IndexUnavailable as exc:
        _fail(f"{exc} (HYPA_INDEX={components.settings.index_backend})")


def _check_collection(components, collection: str) -> None:
    known = _index_collections(components)
    if collection not in known:
        from bot.wiring import collection_hint

        same = [k for k in known if k.lower() == collection.lower()]
        if same:  # collection names are case-sensitive: "LL144" is not "ll144"
            _fail(f"collection '{collection}' is not in the index; did you mean '{same[0]}'?")
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
    """Answer one question with cited provisions (exit status 2 when the message is no question:
    empty, too long, no words)."""
    from core.pipeline import INVALID_QUESTION

    settings = _settings()
    if fusion not in (None, "rankedFusion", "relativeScoreFusion"):
        _fail("--fusion must be rankedFusion or relativeScoreFusion")
    components = _components(settings, top_k=top_k, fusion=fusion, alpha=alpha, config=_checked_config(config))
    collection = collection or settings.collection
    _check_collection(components, collection)
    result = components.pipeline.answer(question, collection=collection)
    _print_result(result, as_json)
    if result.answer.note == INVALID_QUESTION:  # printed as a reply; a script sees it was no question
        raise typer.Exit(2)


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
    components = _components_tuned(settings)
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
    components.warm_up(collection)
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
        None,
        "--scope-review",
        help="TOML of corrected out-of-scope labels [default: the LL144 dev review when --gold is ll144_dev.jsonl].",
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
    from core.errors import DatasetError
    from core.eval import DEFAULT_SCOPE_REVIEW, build_report, render_markdown, render_rich
    from core.eval.report import read_results
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
    from core.errors import DatasetError
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
