"""Setup errors (a wrong model folder, a bad config) reach the user as one clear line, not a traceback."""
from __future__ import annotations

import pytest
import typer
from typer.testing import CliRunner

from bot.cli_common import SetupErrorsAsMessages
from core.errors import ConfigError, RerankerUnavailable
from storage.embedder import EmbeddingModelNotFound


def _app_raising(exc: BaseException) -> typer.Typer:
    app = typer.Typer(cls=SetupErrorsAsMessages, pretty_exceptions_enable=False)

    @app.command()
    def ask() -> None:
        raise exc

    @app.command()
    def other() -> None:  # a second command so typer keeps `ask` as a sub-command
        pass

    return app


@pytest.mark.parametrize(
    "exc",
    [
        RerankerUnavailable("Reranker model folder /nope does not exist. Set HYPA_RERANKER_MODEL."),
        EmbeddingModelNotFound("Embedding model folder /nope does not exist."),
        ConfigError("bot/retrieval_configs.toml: invalid retrieval config"),
    ],
)
def test_a_setup_error_is_one_line_and_exit_code_2(exc):
    result = CliRunner().invoke(_app_raising(exc), ["ask"])
    assert result.exit_code == 2
    assert "error:" in result.output and str(exc).split(".")[0] in " ".join(result.output.split())
    assert "Traceback" not in result.output


def test_other_exceptions_are_not_hidden():
    result = CliRunner().invoke(_app_raising(ZeroDivisionError("a bug")), ["ask"])
    assert isinstance(result.exception, ZeroDivisionError)


def test_the_hypa_command_uses_it():
    from bot.cli import app

    assert isinstance(typer.main.get_command(app), SetupErrorsAsMessages)
