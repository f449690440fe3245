"""The single HTTP listener (HYPA_HTTP_PORT): platform routes + /healthz, /readyz, /metrics.

Platform adapters contribute their routes (Slack: /slack/events; Telegram webhook); this module adds
the operational ones. Starlette + uvicorn: small, async, and what slack-bolt and PTB both adapt to.

Every request body is capped (HYPA_HTTP_MAX_BODY_BYTES) before any route sees it: anyone can POST to
a public request URL, and a route that reads, parses or logs a body costs the bot in proportion to
its size. Slack's and Telegram's own requests are a few kilobytes.
"""
from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Callable, Sequence

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from bot.metrics import Metrics

log = logging.getLogger(__name__)

ReadinessCheck = Callable[[], dict[str, bool]]  # {"index": True, "database": False, ...}
DEFAULT_MAX_BODY_BYTES = 1024 * 1024  # bot.settings: http_max_body_bytes


@dataclass(frozen=True)
class HttpConfig:
    """Where the one HTTP listener runs and what it logs (HYPA_HTTP_HOST, HYPA_HTTP_PORT, HYPA_LOG_LEVEL,
    HYPA_HTTP_MAX_BODY_BYTES; bot.configs.http_config)."""

    host: str = "0.0.0.0"
    port: int = 3000
    log_level: str = "INFO"
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES


class BodyLimit:
    """ASGI middleware: a request whose body is over `max_bytes` gets 413 and reaches no route.

    A declared Content-Length over the limit is refused before a byte of the body is read; a body
    without one (chunked) is read only up to the limit. A body within it is buffered and handed to
    the app unchanged.
    """

    def __init__(self, app: ASGIApp, max_bytes: int, metrics: Metrics | None = None) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.max_bytes:
            await self._refuse(scope, send, f"content-length {declared}")
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return  # the client left: nobody to answer
            body = message.get("body", b"")
            size += len(body)
            if size > self.max_bytes:
                await self._refuse(scope, send, f"over {size} bytes without a content-length")
                return
            chunks.append(body)
            if not message.get("more_body", False):
                break
        await self.app(scope, _replay(b"".join(chunks), receive), send)

    async def _refuse(self, scope: Scope, send: Send, size: str) -> None:
        client = scope.get("client")
        log.warning(
            "request refused: body over %d bytes (%s): %s %s from %s",
            self.max_bytes, size, scope.get("method", ""), scope.get("path", ""), client[0] if client else "?",
        )
        if self.metrics is not None:
            self.metrics.count_rejected(scope.get("path", ""), "too_large")
        # Connection: close, so the server does not wait for (or read) the rest of the body.
        response = JSONResponse(
            {"error": f"request body over {self.max_bytes} bytes"}, status_code=413, headers={"connection": "close"}
        )
        await response(scope, _no_body, send)


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None  # the server rejects a malformed one itself
    return None


def _replay(body: bytes, receive: Receive) -> Receive:
    """A receive() that yields the buffered body once, then whatever the server sends next (a disconnect)."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


async def _no_body() -> Message:  # pragma: no cover - a plain response never reads the request
    return {"type": "http.disconnect"}


def build_http_app(
    *,
    routes: Sequence[BaseRoute] = (),
    readiness: ReadinessCheck = lambda: {},
    metrics: Metrics | None = None,
    lifespan=None,  # noqa: ANN001 - a Starlette lifespan context (e.g. starts the Telegram application)
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
) -> Starlette:
    async def healthz(_: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def readyz(_: Request) -> Response:
        # The checks do blocking I/O (an index read, `SELECT 1`): off the event loop that must keep
        # acknowledging Slack within 3 s. A check that raises means "not ready", never a 500.
        try:
            checks = await asyncio.to_thread(readiness)
        except Exception as exc:  # noqa: BLE001
            log.warning("readiness check failed: %s", exc)
            checks = {"readiness": False}
        ready = all(checks.values())
        return JSONResponse({"ready": ready, "checks": checks}, status_code=200 if ready else 503)

    async def metrics_endpoint(_: Request) -> Response:
        if metrics is None:
            return Response("metrics disabled\n", status_code=404, media_type="text/plain")
        return Response(metrics.render(), media_type=metrics.content_type)

    ops = [
        Route("/healthz", healthz, methods=["GET"]),
        Route("/readyz", readyz, methods=["GET"]),
        Route("/metrics", metrics_endpoint, methods=["GET"]),
    ]
    app = Starlette(routes=[*routes, *ops], lifespan=lifespan)
    app.add_middleware(BodyLimit, max_bytes=max_body_bytes, metrics=metrics)
    return app
