"""The check every HTTP request to /slack/events passes before slack-bolt sees it.

Anyone can POST to a public request URL, so what a request costs the bot before it is known to come
from Slack must be small and must not depend on what the sender put in it. bolt itself parses the
body before verifying the signature (a malformed body, or a non-numeric timestamp, then ends as an
HTTP 500 with a traceback) and logs the whole body of every request that fails verification. Here,
in order, on the raw bytes (whose size bot.http_app has already capped):

1. the signature headers: present, a numeric timestamp, not older or newer than five minutes, and
   `v0=HMAC-SHA256(signing secret, b"v0:{timestamp}:" + body)` over the body's bytes as received
   (slack_sdk's SignatureVerifier computes the same, but decodes the body as UTF-8 first, which
   raises on a body that is not) -> else 401;
2. only then the body: UTF-8, and what bolt's own parser makes of it a JSON object -> else 400.

A refused request gets one short log line (the reason, its size and sender, never its body).
"""
from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from slack_bolt.request.internals import build_normalized_headers, extract_content_type, parse_body

# Slack's replay window (slack_sdk.signature.SignatureVerifier uses the same five minutes).
MAX_AGE_S = 5 * 60


@dataclass(frozen=True)
class Refusal:
    status: int  # 401: not shown to come from Slack; 400: from Slack, but not a request bolt can read
    reason: str  # a metric label: no_signature, malformed_timestamp, stale_timestamp, bad_signature, ...
    detail: str  # one short phrase for the log and the response body (never the request's content)


class SlackRequestGate:
    def __init__(self, signing_secret: str, *, clock: Callable[[], float] = time.time) -> None:
        self._secret = signing_secret.encode("utf-8")
        self._clock = clock

    def check(self, raw: bytes, headers: Mapping[str, str]) -> Refusal | None:
        """None when the request is signed by Slack and readable; otherwise why not."""
        return self._check_signature(raw, headers) or _check_body(raw, headers)

    def _check_signature(self, raw: bytes, headers: Mapping[str, str]) -> Refusal | None:
        timestamp = headers.get("x-slack-request-timestamp", "")
        signature = headers.get("x-slack-signature", "")
        if not timestamp or not signature:
            return Refusal(401, "no_signature", "no X-Slack-Signature / X-Slack-Request-Timestamp")
        # int() would accept " 17", "1_700" or a thousand digits; a Slack timestamp is plain seconds.
        if not (timestamp.isascii() and timestamp.isdigit() and len(timestamp) <= 12):
            return Refusal(401, "malformed_timestamp", "X-Slack-Request-Timestamp is not a number of seconds")
        if abs(self._clock() - int(timestamp)) > MAX_AGE_S:
            return Refusal(401, "stale_timestamp", "X-Slack-Request-Timestamp is more than five minutes off")
        if not hmac.compare_digest(signature.encode("utf-8", "replace"), self.signature(timestamp, raw).encode()):
            return Refusal(401, "bad_signature", "invalid signature")
        return None

    def signature(self, timestamp: str, raw: bytes) -> str:
        """Slack's v0 signature of a body (the X-Slack-Signature a genuine request carries)."""
        digest = hmac.new(self._secret, b"v0:" + timestamp.encode("ascii") + b":" + raw, hashlib.sha256)
        return "v0=" + digest.hexdigest()


def _check_body(raw: bytes, headers: Mapping[str, str]) -> Refusal | None:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return Refusal(400, "malformed_body", "the body is not UTF-8")
    content_type = extract_content_type(build_normalized_headers(dict(headers)))
    try:
        body = parse_body(text, content_type)  # bolt's parser: what passes here is what bolt will read
    except ValueError:  # json.JSONDecodeError included
        return Refusal(400, "malformed_body", "the body is not JSON or a form with a JSON payload")
    if not isinstance(body, dict):
        return Refusal(400, "malformed_body", "the body is not a JSON object")
    return None
