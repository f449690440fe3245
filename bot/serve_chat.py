"""What every `hypa serve <platform>` shares: one setup error, one order of start-up steps, one HTTP server.

A chat platform is a `bot/serve_<name>.py` module (docs/ADAPTERS.md) that fills in a `ChatPlatform`:

    missing_settings(settings) -> list[str]   the settings it cannot run without, one line each
    config(settings) -> Config                its typed config (bot/configs.py; the adapter never sees Settings)
    check_token(config) -> str                asks the platform who the bot is: a rejected token, an
                                              unreachable API or a refused webhook is a ServeSetupError
    build_server(config, service, *, metrics, readiness, max_body_bytes) -> Server
                                              the adapter inside bot.http_app (no network I/O)
    run(server, http) -> coroutine            serves until SIGINT/SIGTERM (uvicorn, plus a connection
                                              of the platform's own, e.g. Slack's Socket Mode)

`serve_chat` runs them in this order, the same for every platform: settings checked before anything
slow loads; the token before the index (a wrong token is one line in a second, not after the models
load); the store opened and the index checked and warmed up before the first question; then serving.
Anything the operator must fix is a `ServeSetupError`, which `hypa serve` prints as one message.
"""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from bot.http_app import HttpConfig, ReadinessCheck
from bot.metrics import Metrics
from bot.settings import Settings
from core.conversation import ConversationService

if TYPE_CHECKING:
    import uvicorn
    from starlette.applications import Starlette

    from bot.wiring import Components

log = logging.getLogger(__name__)


class ServeSetupError(Exception):
    """Something the operator must fix before a chat bot can run (a missing setting, a token the platform
    rejects, an index not built yet). The message says what to fix; `hypa serve` shows it without a traceback."""


class ChatServer(Protocol):
    """What `build_server` returns: the HTTP app (platform routes, /healthz, /readyz, /metrics; its
    lifespan starts and stops the platform's client)."""

    @property
    def http_app(self) -> Starlette: ...

    def describe(self) -> str:
        """How the platform reaches the bot (e.g. "Socket Mode", "webhook …"), for the start-up log line."""
        ...


ConfigT = TypeVar("ConfigT")
ServerT = TypeVar("ServerT", bound=ChatServer)
ConfigT_contra = TypeVar("ConfigT_contra", contravariant=True)
ServerT_co = TypeVar("ServerT_co", bound=ChatServer, covariant=True)


class ServerBuilder(Protocol[ConfigT_contra, ServerT_co]):
    """`build_<name>_server`: the same arguments on every platform."""

    def __call__(
        self,
        config: ConfigT_contra,
        service: ConversationService,
        /,
        *,
        metrics: Metrics | None = ...,
        readiness: ReadinessCheck = ...,
        max_body_bytes: int = ...,
    ) -> ServerT_co: ...


@dataclass(frozen=True)
class ChatPlatform(Generic[ConfigT, ServerT]):
    """One chat platform's steps, run by `serve_chat` (see the module docstring)."""

    name: str  # the `hypa serve <name>` command
    missing_settings: Callable[[Settings], list[str]]
    config: Callable[[Settings], ConfigT]
    check_token: Callable[[ConfigT], str]
    build_server: ServerBuilder[ConfigT, ServerT]
    run: Callable[[ServerT, HttpConfig], Coroutine[Any, Any, None]]


def serve_chat(platform: ChatPlatform[ConfigT, ServerT], settings: Settings) -> None:
    """Run a chat bot until SIGINT/SIGTERM. Raises ServeSetupError for anything the operator must fix."""
    from bot.configs import http_config
    from bot.logging_setup import configure_logging
    from bot.wiring import Components

    require_settings(platform.name, platform.missing_settings(settings))  # before anything slow loads
    # JSON or text per HYPA_LOG_FORMAT, secrets scrubbed; quiets httpx, whose INFO lines carry Telegram's token.
    configure_logging(settings)
    config = platform.config(settings)
    identity = platform.check_token(config)
    components = Components(settings)
    server = build_server(platform.build_server, config, components, Metrics())
    warm_up(components)
    http = http_config(settings)
    log.info("%s bot %s starting (%s); health and metrics on http://%s:%d",
             platform.name, identity, server.describe(), http.host, http.port)
    asyncio.run(platform.run(server, http))


def require_settings(command: str, missing: Sequence[str]) -> None:
    """One ServeSetupError listing every missing setting, so the operator fixes them all at once."""
    if missing:
        raise ServeSetupError(f"hypa serve {command} needs:\n" + "\n".join(f"  {m}" for m in missing))


def build_server(
    build: ServerBuilder[ConfigT, ServerT], config: ConfigT, components: Components, metrics: Metrics
) -> ServerT:
    """A platform's server as `hypa serve` builds it: over the stored ConversationService (this opens the
    database: a bad HYPA_DATABASE_URL fails here), with /readyz checking the index, the database and
    stuck answers (bot/health.py), and the body limit of HYPA_HTTP_MAX_BODY_BYTES."""
    from bot.health import readiness_check

    return build(
        config, components.conversation(metrics), metrics=metrics, readiness=readiness_check(components),
        max_body_bytes=components.settings.http_max_body_bytes,
    )


def warm_up(components: Components) -> None:
    """Every served collection is in the index (else a ServeSetupError naming the command that builds
    it); then the index, models and term statistics load now, not while the first person waits."""
    from core.errors import GlossaryError, PrecedentError

    problem = components.missing_collections_problem()
    if problem:
        raise ServeSetupError(problem)
    try:
        components.warm_up()
    except (GlossaryError, PrecedentError) as exc:  # an operator's file (HYPA_GLOSSARY_DIR, HYPA_PRECEDENTS_DIR) to fix
        raise ServeSetupError(str(exc)) from None


def http_server(app: Starlette, http: HttpConfig, *, access_log: bool = True) -> uvicorn.Server:
    """uvicorn on HYPA_HTTP_HOST:HYPA_HTTP_PORT; `await server.serve()` runs it until SIGINT/SIGTERM,
    then runs the app's lifespan shutdown (the adapters drain the answers in flight there)."""
    import uvicorn

    config = uvicorn.Config(
        app, host=http.host, port=http.port, lifespan="on", log_level=http.log_level.lower(), access_log=access_log,
        log_config=None,  # keep bot.logging_setup's handler (JSON or text, secrets scrubbed)
    )
    return uvicorn.Server(config)

