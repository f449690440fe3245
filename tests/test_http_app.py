"""bot.http_app: /readyz runs its (blocking) checks off the event loop and never answers 500."""
from __future__ import annotations

import asyncio
import threading

import httpx

from bot.http_app import build_http_app


def test_readiness_checks_run_off_the_event_loop():
    seen: dict[str, object] = {}

    def readiness() -> dict[str, bool]:
        try:
            asyncio.get_running_loop()
            seen["on_loop"] = True
        except RuntimeError:
            seen["on_loop"] = False
        seen["thread"] = threading.current_thread().name
        return {"database": True}

    async def probe() -> httpx.Response:
        transport = httpx.ASGITransport(app=build_http_app(readiness=readiness))
        async with httpx.AsyncClient(transport=transport, base_url="http://app") as client:
            return await client.get("/readyz")

    response = asyncio.run(probe())
    assert response.status_code == 200 and response.json() == {"ready": True, "checks": {"database": True}}
    assert seen["on_loop"] is False  # a slow database would otherwise stall every Slack ack


def test_a_readiness_check_that_raises_is_not_ready_rather_than_a_500():
    def readiness() -> dict[str, bool]:
        raise RuntimeError("weaviate client closed")

    async def probe() -> httpx.Response:
        transport = httpx.ASGITransport(app=build_http_app(readiness=readiness), raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://app") as client:
            return await client.get("/readyz")

    response = asyncio.run(probe())
    assert response.status_code == 503 and response.json()["ready"] is False
