"""Terminal front end: renders answers with their sources and runs the interactive chat."""
from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.panel import Panel

from core.types import PipelineResult, Turn

QUOTE_CHARS = 240


def render_result(console: Console, result: PipelineResult) -> None:
    answer = result.answer
    style = "yellow" if answer.refused else "green"
    console.print(Panel(escape(answer.text), title="answer", border_style=style))
    if answer.note:
        console.print(f"[dim]note: {escape(answer.note)}[/]")
    seen: set[int] = set()
    for c in answer.citations:
        head = f"[{c.n}] {c.label}" if c.n not in seen else f"    {c.label}"
        seen.add(c.n)
        quote = " ".join(c.quote.split())
        if len(quote) > QUOTE_CHARS:
            quote = quote[: QUOTE_CHARS - 1] + "…"
        console.print(f"[bold]{escape(head)}[/]  [dim]“{escape(quote)}”[/]")
    if result.contexts:
        labels = []
        for sc in result.contexts:
            if sc.chunk.label not in labels:
                labels.append(sc.chunk.label)
        console.print(f"[dim]sections searched: {escape('; '.join(labels))}[/]")


def run_chat(console: Console, pipeline, collection: str) -> None:
    """A read-answer loop that keeps the conversation, like a thread in the bots."""
    console.print(
        f"[bold]hypa chat[/] on collection '{collection}'. Ask a question; follow-ups use the conversation. "
        "Type /new for a fresh conversation, /quit (or Ctrl-D) to leave."
    )
    history: list[Turn] = []
    while True:
        try:
            line = console.input("[bold cyan]you>[/] ")
        except (EOFError, KeyboardInterrupt):
            console.print()
            return
        text = line.strip()
        if text in ("/quit", "/exit"):
            return
        if text == "/new":
            history.clear()
            console.print("[dim]new conversation[/]")
            continue
        if not text:
            continue
        result = pipeline.answer(text, history, collection=collection)
        render_result(console, result)
        history.extend([Turn("user", text), Turn("assistant", result.answer.text)])
