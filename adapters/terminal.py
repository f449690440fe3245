"""Terminal front end: renders answers with their sources and runs the interactive chat.

`hypa chat` is an adapter like the Slack and Telegram ones: each line becomes an IncomingMessage for
the conversation service (so the thread is stored and ratings land in the same feedback log).
"""
from __future__ import annotations

import uuid

from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.style import Style
from rich.text import Text

from adapters.citations import Source, sources
from core.conversation import ConversationService, FeedbackEvent, IncomingMessage, Reply
from core.types import Answer, PipelineResult

PLATFORM = "terminal"

QUOTE_CHARS = 240


def render_result(console: Console, result: PipelineResult) -> None:
    """A pipeline result (`hypa ask`): the answer, its sources, and the sections that were searched."""
    render_reply(console, result.answer)
    if result.contexts:
        labels = []
        for sc in result.contexts:
            if sc.chunk.label not in labels:
                labels.append(sc.chunk.label)
        console.print(f"[dim]sections searched: {escape('; '.join(labels))}[/]")


def render_reply(console: Console, reply: Reply | Answer) -> None:
    """An answer (a chat Reply or a pipeline Answer: the same fields) and its numbered sources (with
    their quotes when the answer does not show them)."""
    style = "yellow" if reply.refused else "green"
    console.print(Panel(escape(reply.text), title="answer", border_style=style))
    if reply.note:
        console.print(f"[dim]note: {escape(reply.note)}[/]")
    for source in sources(reply.citations, reply.text):
        console.print(_source_line(source))


def _source_line(source: Source) -> Text:
    """"[1] label https://…  “quote”": each label a terminal hyperlink to its official text, and the
    address printed after it (terminals without hyperlinks show it, and it can be copied)."""
    line = Text(f"[{source.n}] ", style="bold")
    for i, (label, url) in enumerate(source.linked()):
        if i:
            line.append("; ", style="bold")
        line.append(label, style=Style(bold=True, link=url or None))
        if url:
            line.append(f" {url}", style=Style(dim=True, link=url))
    quote = " ".join(source.quote.split())
    if len(quote) > QUOTE_CHARS:
        quote = quote[: QUOTE_CHARS - 1] + "…"
    if quote:
        line.append(f"  “{quote}”", style="dim")
    return line


def run_chat(console: Console, service: ConversationService, user: str) -> None:
    """A read-answer loop over the conversation service, like a thread in the bots: the thread's
    history is stored (follow-ups work), and /good or /bad rates the last answer."""
    console.print(
        "[bold]hypa chat[/]. Ask a question; follow-ups use the conversation. "
        "/good or /bad \\[reason] rates the last answer, /new starts a fresh conversation, /quit (or Ctrl-D) leaves."
    )
    thread = _new_thread()
    last_answer = ""
    turn = 0
    while True:
        try:
            line = console.input("[bold cyan]you>[/] ")
        except (EOFError, KeyboardInterrupt):
            console.print()
            return
        text = line.strip()
        command, _, rest = text.partition(" ")
        if command in ("/quit", "/exit"):
            return
        if command == "/new":
            thread, last_answer = _new_thread(), ""
            console.print("[dim]new conversation[/]")
            continue
        if command in ("/good", "/bad"):
            _rate(console, service, last_answer, user, 1 if command == "/good" else -1, rest.strip())
            continue
        if not text:
            continue
        turn += 1
        message = IncomingMessage(
            platform=PLATFORM, workspace="local", channel=user, thread=thread, user=user, text=text,
            message_id=f"{thread}.{turn}",
        )
        reply = service.handle(message)
        render_reply(console, reply)
        last_answer = reply.answer_id
        if reply.followup is not None:
            _show_followup(console, reply)


def _show_followup(console: Console, shown: Reply) -> None:
    """The quoted answer is shown; wait for Claude's (Ctrl-C skips it: the quoted one stands)."""
    console.print("[dim]waiting for Claude's answer… (Ctrl-C to skip it)[/]")
    assert shown.followup is not None  # called only for a reply with Claude's answer to come
    try:
        final = shown.followup.result()
    except KeyboardInterrupt:
        console.print("[dim]skipped; the quoted answer above stands (Claude's is still stored when it arrives)[/]")
        return
    except Exception:  # noqa: BLE001 - the quoted answer is complete; say so and go on
        console.print("[dim]Claude's answer could not be stored; the quoted answer above stands[/]")
        return
    if final.text == shown.text:  # Claude failed after all: the quoted answer stands, with the reason
        console.print(f"[dim]note: {escape(final.note)}[/]")
        return
    console.rule("[bold]Claude's answer")
    render_reply(console, final)


def _rate(console: Console, service: ConversationService, answer_id: str, user: str, rating: int, reason: str) -> None:
    if not answer_id:
        console.print("[dim]nothing to rate yet: ask a question first[/]")
        return
    event = FeedbackEvent(answer_id, PLATFORM, user, rating, source="command", reason=reason)  # type: ignore[arg-type]
    outcome = service.record_feedback(event)
    mark = "👍" if rating > 0 else "👎"
    console.print(f"[dim]{'rated ' + mark if outcome.changed else 'already rated ' + mark} (hypa feedback report)[/]")


def _new_thread() -> str:
    return f"chat-{uuid.uuid4().hex[:12]}"
