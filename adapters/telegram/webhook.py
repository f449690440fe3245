"""The Telegram webhook route on our Starlette app: check the secret, hand the update to PTB.

Telegram sends the secret given to setWebhook in `X-Telegram-Bot-Api-Secret-Token`; anything else
is rejected (403) before the body is read. The update is queued and answered 200 once the handlers
have recorded it (a question: claimed with its lease, recording.py) — milliseconds, not the answer's
time — so Telegram never waits for an answer to be generated, and a crash after the 200 cannot lose
the question.
"""
from __future__ import annotations

import hmac
import logging

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from telegram import Update
from telegram.ext import Application

from adapters.telegram.recording import UpdateRecorder

log = logging.getLogger(__name__)

SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"


def webhook_route(application: Application, path: str, secret: str, recorder: UpdateRecorder | None = None) -> Route:
    if not secret:
        raise ValueError("a Telegram webhook needs a secret token (TELEGRAM_WEBHOOK_SECRET)")
    expected = secret.encode("utf-8")

    async def receive(request: Request) -> Response:
        given = request.headers.get(SECRET_HEADER, "").encode("utf-8")
        if not hmac.compare_digest(given, expected):
            return JSONResponse({"error": "forbidden"}, status_code=403)
        try:
            data = await request.json()
            update = Update.de_json(data, application.bot) if isinstance(data, dict) and "update_id" in data else None
        except Exception:  # noqa: BLE001 - malformed JSON, or an object PTB cannot read (de_json raises
            update = None  # ValueError, TypeError, KeyError or AttributeError depending on the shape)
        if update is None:
            log.warning("telegram webhook: unreadable update ignored")
            return JSONResponse({"error": "not a Telegram update"}, status_code=400)
        if recorder is not None:
            recorder.expect([update.update_id])
        await application.update_queue.put(update)
        if recorder is not None:
            await recorder.wait([update.update_id])
        return Response(status_code=200)

    return Route(path, receive, methods=["POST"])
