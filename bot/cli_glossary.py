"""`hypa glossary show`: the users' words a collection's questions are searched with (core/glossary.py)."""
from __future__ import annotations

from typing import Optional

import typer

from bot.cli_common import command_group, fail, load_settings, out

glossary_app = command_group(help="Inspect the glossaries that bridge users' words to the law's.", no_args_is_help=True)


@glossary_app.command("show")
def glossary_show(
    collection: str = typer.Argument(..., help="The collection, e.g. ll144 or eu-ai-act."),
    question: Optional[str] = typer.Argument(None, help="A question: show what is searched for it."),
) -> None:
    """List a collection's glossary entries, or show how one question is read.

    Entries come from the manifest corpora's glossaries (bot/glossaries) and from
    <collection>.toml in HYPA_GLOSSARY_DIR (default: <data dir>/glossaries). Phrasings the
    collection's own text keeps using are left out (they are the law's words already) and listed
    as such. Then the topics the law does not mention ([silent]), flagging any phrasing the
    collection's text does use. With a question: its spelling corrections, abbreviations and
    glossary expansions, the text that is searched, and a topic it asks about that the law does not
    mention.
    """
    from bot.cli import _check_collection
    from bot.wiring import Components
    from core.errors import GlossaryError
    from core.extractive import asked_text

    settings = load_settings()
    components = Components(settings)
    _check_collection(components, collection)
    try:
        configured = components.glossaries.get(collection)
        lexicon = components.lexicon(collection)
    except GlossaryError as exc:
        fail(str(exc))
    if question is not None:
        normalised = lexicon.normalise(question)
        for typed, read in normalised.corrections:
            out.print(f"spelling: {typed!r} read as {read!r}", markup=False, highlight=False, soft_wrap=True)
        for typed, law in normalised.expansions:
            out.print(f"read with: {typed!r} -> {law!r}", markup=False, highlight=False, soft_wrap=True)
        out.print(f"searched: {normalised.text}", markup=False, highlight=False, soft_wrap=True)
        for topic in configured.silent_on(asked_text(question)) if configured else []:
            out.print(
                f"asks about what the law does not mention: {topic} (declined unless a provision found for it uses the words)",
                markup=False, highlight=False, soft_wrap=True,
            )
        return
    if not configured:
        where = "HYPA_GLOSSARY=false" if not settings.glossary else f"none in bot/corpora.toml or {settings.glossaries_dir}"
        out.print(f"collection {collection!r} has no glossary ({where}).")
        return
    used = {e.law: set(e.phrasings) for e in lexicon.glossary.entries}
    for entry in configured.entries:
        kept = used.get(entry.law, set())
        line = f"{entry.law} <- " + ", ".join(p for p in entry.phrasings if p in kept)
        left_out = [p for p in entry.phrasings if p not in kept]
        if left_out:
            line += f" (left out, the text uses them: {', '.join(left_out)})"
        out.print(line, markup=False, highlight=False, soft_wrap=True)
    if configured.silences:
        out.print("\nnot mentioned by the law (a question asking about one is told so):", markup=False, highlight=False)
        text = "\n".join(f"{c.heading}\n{c.text}" for c in components.index.chunks(collection))
        in_text = configured.silence_phrasings_used_in(text)
        for silence in configured.silences:
            line = f"{silence.topic} <- " + ", ".join(silence.phrasings)
            if in_text.get(silence.topic):
                line += f" (check: the text uses {', '.join(in_text[silence.topic])})"
            out.print(line, markup=False, highlight=False, soft_wrap=True)
