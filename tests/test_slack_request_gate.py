"""adapters.slack.request_gate: the signature is checked on the raw bytes before the body is parsed."""
from __future__ import annotations

import json

import pytest
from slack_sdk.signature import SignatureVerifier

from adapters.slack.request_gate import SlackRequestGate

SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
NOW = 1_700_000_000


def gate() -> SlackRequestGate:
    return SlackRequestGate(SECRET, clock=lambda: NOW)


def signed(raw: bytes, timestamp: int = NOW, content_type: str = "application/json") -> dict[str, str]:
    return {
        "x-slack-request-timestamp": str(timestamp),
        "x-slack-signature": gate().signature(str(timestamp), raw),
        "content-type": content_type,
    }


def test_the_signature_is_slacks_v0_scheme():
    body = json.dumps({"type": "event_callback", "text": "naïve ✓"})
    expected = SignatureVerifier(SECRET).generate_signature(timestamp=str(NOW), body=body)
    assert gate().signature(str(NOW), body.encode()) == expected


def test_a_signed_readable_request_passes():
    raw = json.dumps({"type": "event_callback"}).encode()
    assert gate().check(raw, signed(raw)) is None
    form = b"payload=%7B%22type%22%3A%22block_actions%22%7D"
    assert gate().check(form, signed(form, content_type="application/x-www-form-urlencoded")) is None


@pytest.mark.parametrize("age_s, ok", [(300, True), (-300, True), (301, False), (-301, False)])
def test_the_timestamp_must_be_within_five_minutes(age_s, ok):
    raw = b"{}"
    refusal = gate().check(raw, signed(raw, timestamp=NOW - age_s))
    assert (refusal is None) is ok
    if not ok:
        assert (refusal.status, refusal.reason) == (401, "stale_timestamp")


def test_the_signature_is_checked_before_the_body_is_read():
    raw = b"\xff not even utf-8"
    refusal = gate().check(raw, {"x-slack-request-timestamp": str(NOW), "x-slack-signature": "v0=" + "0" * 64})
    assert (refusal.status, refusal.reason) == (401, "bad_signature")
    refusal = gate().check(raw, signed(raw))
    assert (refusal.status, refusal.reason) == (400, "malformed_body")


def test_a_body_differing_by_one_byte_is_refused():
    raw = b'{"type": "event_callback"}'
    headers = signed(raw)
    assert gate().check(raw.replace(b"event", b"Event"), headers).reason == "bad_signature"


def test_refusals_never_quote_the_request():
    raw = b'["SECRET-LOOKING-CONTENT"]'
    for headers in ({}, signed(raw)):
        refusal = gate().check(raw, headers)
        assert "SECRET-LOOKING" not in refusal.detail
