"""`hypa … --help` shows every help text as written, "[default: …]" included, for every command."""
from __future__ import annotations

import re

import typer.main
from typer.testing import CliRunner

from bot.cli import app

_BRACKETED = re.compile(r"\[[^\]]+\]")


def _commands(command, path: tuple[str, ...] = ()):
    """(path, command) for the root and every sub-command (typer ships its own click: duck-typed)."""
    yield path, command
    if hasattr(command, "commands"):
        for name, sub in command.commands.items():
            yield from _commands(sub, (*path, name))


def _normalized(text: str) -> str:
    return " ".join(text.split())


def test_every_bracketed_note_in_a_help_text_is_shown():
    """Typer reads help texts as Rich markup by default, where "[default: HYPA_COLLECTION]" is a
    style tag: it vanished from --help for every option documented that way."""
    root = typer.main.get_command(app)
    checked = 0
    for path, command in _commands(root):
        texts = [p.help for p in command.params if getattr(p, "help", None)] + [command.help or ""]
        notes = [note for text in texts for note in _BRACKETED.findall(_normalized(text))]
        if not notes:
            continue
        result = CliRunner().invoke(app, [*path, "--help"], terminal_width=100)
        assert result.exit_code == 0, result.output
        shown = _normalized(result.output)
        for note in notes:
            assert note in shown, f"hypa {' '.join(path)} --help lost {note!r}"
            checked += 1
    assert checked >= 5  # ask, kg stats/show/build, ranker show, eval report at least


def test_ask_help_names_the_setting_a_missing_option_falls_back_to():
    result = CliRunner().invoke(app, ["ask", "--help"], terminal_width=100)
    assert "Collection to search [default: HYPA_COLLECTION]." in _normalized(result.output)
    assert "[default: HYPA_RETRIEVAL_CONFIG]" in _normalized(result.output)
