"""The single HTTP listener (HYPA_HTTP_PORT): platform routes + /healthz, /readyz, /metrics.

Platform adapters contribute their routes (Slack: /slack/events; Telegram webhook); this module adds
the operational ones. Starlette + uvicorn: small, async, and what slack-bolt and PTB both adapt to.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Callable, Sequence

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from bot.metrics import Metrics

log = logging.getLogger(__name__)

ReadinessCheck = Callable[[], dict[str, bool]]  # {"index": True, "database": False, ...}


def build_http_app(
    *,
    routes: Sequence[BaseRoute] = (),
    readiness: ReadinessCheck = lambda: {},
    metrics: Metrics | None = None,
    lifespan=None,  # noqa: ANN001 - a Starlette lifespan context (e.g. starts the Telegram application)
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
    return Starlette(routes=[*routes, *ops], lifespan=lifespan)
