"""The fake Slack Web API speaks the wire format the real slack_sdk clients use (form and JSON bodies)."""
from __future__ import annotations

import pytest
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_handlers import RateLimitErrorRetryHandler

from hypa_testkit.fakes.slack_server import BOT_ID, BOT_USER_ID, FakeSlack


@pytest.fixture
def fake():
    with FakeSlack() as server:
        yield server


def client(fake: FakeSlack, **kwargs) -> WebClient:
    return WebClient(token="xoxb-test-token", base_url=fake.base_url, **kwargs)


def test_messages_are_stored_updated_and_read_back_as_a_thread(fake):
    web = client(fake)
    assert web.auth_test()["user_id"] == BOT_USER_ID and web.auth_test()["bot_id"] == BOT_ID
    root = web.chat_postMessage(channel="C1", text="root")["ts"]
    reply = web.chat_postMessage(channel="C1", thread_ts=root, text="placeholder",
                                 blocks=[{"type": "section", "text": {"type": "mrkdwn", "text": "x"}}])
    web.chat_update(channel="C1", ts=reply["ts"], text="answer", blocks=[])
    replies = web.conversations_replies(channel="C1", ts=root)["messages"]
    assert [m["text"] for m in replies] == ["root", "answer"]
    assert fake.thread("C1", root)[0].edits == 1
    assert web.chat_postEphemeral(channel="C1", user="U1", text="hi")["ok"]
    assert web.reactions_add(channel="C1", timestamp=root, name="eyes")["ok"]
    assert web.reactions_remove(channel="C1", timestamp=root, name="eyes")["ok"]
    web.chat_delete(channel="C1", ts=reply["ts"])
    assert fake.thread("C1", root) == []


def test_form_and_json_bodies_are_both_recorded_with_the_token(fake):
    web = client(fake)
    web.api_call("chat.postMessage", data={"channel": "C1", "text": "form", "blocks": '[{"type": "divider"}]'})
    web.api_call("chat.postMessage", json={"channel": "C2", "text": "json", "blocks": [{"type": "divider"}]})
    form, body = fake.calls_to("chat.postMessage")
    assert "form" in form.headers["content-type"] and "json" in body.headers["content-type"]
    assert form.params["blocks"] == body.params["blocks"] == [{"type": "divider"}]  # form blocks are parsed
    assert (form.params["channel"], body.params["channel"]) == ("C1", "C2")
    assert form.token == body.token == "xoxb-test-token"


def test_scripted_failures_rate_limits_and_auth(fake):
    fake.fail_next("chat.postMessage", status=429, retry_after=0)
    with pytest.raises(SlackApiError) as limited:
        client(fake).chat_postMessage(channel="C1", text="x")
    assert limited.value.response.status_code == 429 and limited.value.response.headers["Retry-After"] == "0"

    fake.fail_next("chat.postMessage", status=429, retry_after=0)
    retrying = client(fake, retry_handlers=[RateLimitErrorRetryHandler(max_retry_count=1)])
    assert retrying.chat_postMessage(channel="C1", text="x")["ok"]  # slack_sdk waited and retried

    fake.fail_next("chat.update", error="cant_update_message")
    with pytest.raises(SlackApiError, match="cant_update_message"):
        client(fake).chat_update(channel="C1", ts="1.2", text="x")
    with pytest.raises(SlackApiError, match="not_authed"):
        WebClient(base_url=fake.base_url).api_call("auth.test")
    with pytest.raises(SlackApiError, match="unknown_method"):
        client(fake).api_call("no.such_method")
    assert len(fake.calls_to("chat.postMessage")) == 3
