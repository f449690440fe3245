"""`hypa precedents show`: the questions whose answering provisions are known (core/precedents.py)."""
from __future__ import annotations

from typing import Optional

import typer

from bot.cli_common import command_group, fail, load_settings, out

precedents_app = command_group(
    help="Inspect the precedents: questions whose answering provisions are known.", no_args_is_help=True
)


@precedents_app.command("show")
def precedents_show(
    collection: str = typer.Argument(..., help="The collection, e.g. ll144 or eu-ai-act."),
    question: Optional[str] = typer.Argument(None, help="A question: show the precedents nearest to it."),
    count: int = typer.Option(5, "--count", "-n", min=1, help="How many of the nearest precedents to show."),
) -> None:
    """Count a collection's precedents, or show which of them a question is close to.

    Precedents come from the manifest corpora's files (bot/precedents) and from the *.jsonl files in
    HYPA_PRECEDENTS_DIR (default: <data dir>/precedents), e.g. `hypa feedback export --reviewed`.
    A precedent whose evidence or provisions the collection does not hold is counted as unresolved.
    With a question: its nearest precedents, their similarity, whether they vote (close enough and
    among the nearest) and the provisions they vote for.
    """
    from bot.cli import _check_collection
    from bot.wiring import Components
    from core.errors import PrecedentError

    settings = load_settings()
    if not settings.precedents:
        out.print("precedents are switched off (HYPA_PRECEDENTS=false).")
        return
    components = Components(settings)
    _check_collection(components, collection)
    try:
        precedents = components.precedents(collection)
    except PrecedentError as exc:
        fail(str(exc))
    config = precedents.config
    if question is None:
        out.print(
            f"{collection}: {len(precedents)} precedents tied to its provisions, {precedents.unresolved} unresolved "
            f"(bot/precedents and {settings.own_precedents_dir}); the nearest {config.neighbours} at similarity "
            f">= {config.min_similarity} add {config.weight} x their similarity to a provision's ranking score.",
            markup=False, highlight=False, soft_wrap=True,
        )
        return
    searched = components.lexicon(collection).normalise(question).text
    vector = components.embedder.embed_queries([searched])[0]
    neighbours = precedents.nearest(vector, max(count, 1))
    if not neighbours:
        out.print(f"{collection} has no precedents.")
        return
    for rank, n in enumerate(neighbours):
        votes = rank < config.neighbours and n.similarity >= config.min_similarity
        labels = ", ".join(dict.fromkeys(precedents.labels[i] for i in n.rows))
        out.print(
            f"{n.similarity:.3f} {'votes' if votes else 'no vote'}: {n.question}\n      -> {labels}",
            markup=False, highlight=False, soft_wrap=True,
        )
