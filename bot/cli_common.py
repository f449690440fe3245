"""What every `hypa` sub-command shares: offline environment, consoles, settings loading, clear errors."""
from __future__ import annotations

import os
from typing import NoReturn

# Offline by default: nothing in this project may download model weights at run time.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import typer  # noqa: E402
import typer.core  # noqa: E402
from pydantic import ValidationError  # noqa: E402
from rich.console import Console  # noqa: E402

from bot.settings import Settings  # noqa: E402

out = Console()
err = Console(stderr=True)


def fail(message: str, code: int = 1) -> NoReturn:
    """Print a one-line error (no traceback) and exit."""
    err.print(f"[bold red]error:[/] {message}")
    raise typer.Exit(code)


def setup_error_types() -> tuple[type[BaseException], ...]:
    """Errors that mean "the installation or settings are wrong", raised lazily when a component is built.

    Each carries a message that says what to fix, so the CLI prints it instead of a traceback.
    Imported here, not at module level, so `hypa --help` stays fast.
    """
    from core.errors import (
        ClassifierArtifactError,
        ConfigError,
        GlossaryError,
        ModelWeightsError,
        PrecedentError,
        RerankerUnavailable,
        TokenStatesError,
    )
    from storage.embedder import EmbeddingModelNotFound

    return (
        ConfigError, ClassifierArtifactError, TokenStatesError, RerankerUnavailable, EmbeddingModelNotFound,
        ModelWeightsError, GlossaryError, PrecedentError,
    )


def command_group(**kwargs) -> typer.Typer:
    """A Typer app (or sub-app) whose help texts are shown as written.

    Typer reads help texts as Rich markup whenever Rich is installed (`rich_markup_mode="rich"`), and
    in Rich markup "[default: HYPA_COLLECTION]" is a style tag: it vanished from `--help`, as did any
    other "[...]" a help text had. hypa's help texts are plain text, so they are rendered as such
    (click's formatter; typer still appends the real defaults, "[default: 30]", itself).
    """
    return typer.Typer(rich_markup_mode=None, **kwargs)


class SetupErrorsAsMessages(typer.core.TyperGroup):
    """The root command group: a setup error from any sub-command becomes `error: <message>`, exit 2.

    Components are built lazily (a misconfigured reranker fails when the first question needs the
    pipeline), so the check sits around every command rather than in each one.
    """

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except Exception as exc:  # noqa: BLE001 - narrowed just below
            if isinstance(exc, setup_error_types()):
                fail(str(exc), code=2)
            raise


def load_settings() -> Settings:
    try:
        return Settings()
    except ValidationError as exc:
        problems = (f"  {_variable(e['loc'])}: {e['msg']}" for e in exc.errors())
        fail("invalid settings (environment or .env):\n" + "\n".join(problems))


def _variable(loc: tuple) -> str:
    """The environment variable a settings field is read from (HYPA_ prefix, upper case)."""
    name = str(loc[0]) if loc else "?"
    return name if name.isupper() else f"HYPA_{name.upper()}"


def first_line(exc: BaseException) -> str:
    """An exception's first line (database driver errors span many), or its class name if it has no text."""
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


def shown_database_url(url: str) -> str:
    """A database URL as it may be printed: password hidden."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return "(not a SQLAlchemy URL)"
