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


# --- request body cap (issue 13: a forged request must cost the bot next to nothing) -------------


def _echo_app(max_body_bytes: int):
    """build_http_app with one route that answers with the size of the body it read."""
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    from bot.metrics import Metrics

    seen: list[int] = []

    async def echo(request: Request):
        body = await request.body()
        seen.append(len(body))
        return JSONResponse({"bytes": len(body), "head": body[:5].decode()})

    metrics = Metrics()
    app = build_http_app(routes=[Route("/echo", echo, methods=["POST"])], metrics=metrics, max_body_bytes=max_body_bytes)
    return app, seen, metrics


def _post(app, **kwargs) -> httpx.Response:
    async def go() -> httpx.Response:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://app") as client:
            return await client.post("/echo", **kwargs)

    return asyncio.run(go())


def test_a_body_over_the_limit_is_refused_with_413_before_the_route_runs(caplog):
    app, seen, metrics = _echo_app(max_body_bytes=1024)
    big = b"{" + b"x" * 5000 + b"}"
    with caplog.at_level("INFO"):
        response = _post(app, content=big)
    assert response.status_code == 413
    assert seen == []  # the route never ran
    refused = [r for r in caplog.records if "refused" in r.getMessage()]
    assert len(refused) == 1 and "xxxx" not in refused[0].getMessage()
    assert b'hypa_rejected_requests_total{path="/echo",reason="too_large"} 1.0' in metrics.render()


def test_a_chunked_body_is_read_only_up_to_the_limit():
    app, seen, _ = _echo_app(max_body_bytes=1024)
    pulled: list[int] = []

    async def chunks():  # no Content-Length: httpx streams these as they are produced
        for i in range(100):
            pulled.append(i)
            yield b"y" * 512

    response = _post(app, content=chunks())
    assert response.status_code == 413 and seen == []
    assert len(pulled) < 10  # stopped at the limit, not after the whole 50 KB


def test_a_body_within_the_limit_reaches_the_route_unchanged():
    app, seen, _ = _echo_app(max_body_bytes=1024)
    response = _post(app, content=b"hello" + b"z" * 1019)  # exactly the limit
    assert response.status_code == 200 and response.json() == {"bytes": 1024, "head": "hello"}
    assert seen == [1024]
    async def parts():
        yield b"hel"
        yield b"lo"

    chunked = _post(app, content=parts())
    assert chunked.json() == {"bytes": 5, "head": "hello"}


def test_the_limit_is_a_setting_with_a_one_megabyte_default():
    from bot.settings import Settings

    assert Settings(_env_file=None).http_max_body_bytes == 1024 * 1024
    assert Settings(_env_file=None, http_max_body_bytes=2048).http_max_body_bytes == 2048
