"""Slack ack latency and duplicate answers under a burst of concurrent, partly retried, signed events.

    .venv/bin/python bench/bench_slack_ack.py [--events 50] [--retries 1] [--rate-limited 0] [--answer-slots N]

The real app (`build_slack_server`, as `hypa serve slack` builds it: bolt AsyncApp, the SQLite
conversation service, uvicorn) runs on 127.0.0.1 against the fake Slack Web API
(tests/fakes/slack_server.py), over the toy index with the model-free HashingEmbedder, so what is
measured is the Slack path (verification, ack, de-duplication, placeholder, update), not retrieval.
N distinct @mentions are sent at once, each also re-delivered `--retries` times with
X-Slack-Retry-Num, all concurrently. Reported: the HTTP ack latency of every delivery
(p50/p95/p99/max), the time until every answer was posted, and duplicate or missing answers.
Targets (issue 6): ack p99 <= 1 s; zero duplicate answers.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from pathlib import Path
from urllib.parse import urlsplit

os.environ.setdefault("HF_HUB_OFFLINE", "1")

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from core.eval.metrics import percentile
from tests.fakes.slack_server import (
    BOT_USER_ID,
    FakeSlack,
    SlackEvents,
    envelope,
    mention_event,
)
from tests.slack_harness import running_bot

QUESTIONS = (
    "What is the civil penalty for a first violation?",
    "How many business days before selling must a seller notify each buyer?",
    "Who counts as a reviewer for a widget audit?",
)


def signed_request(signer: SlackEvents, body: dict, retry_num: int | None) -> bytes:
    """The complete HTTP/1.1 request Slack would send (signed now, so it is fresh)."""
    raw = json.dumps(body)
    headers = signer.headers(raw, retry_num=retry_num)
    target = urlsplit(signer.url)
    lines = [f"POST {target.path} HTTP/1.1", f"host: {target.netloc}", f"content-length: {len(raw.encode())}",
             "connection: close", *(f"{k}: {v}" for k, v in headers.items())]
    return ("\r\n".join(lines) + "\r\n\r\n" + raw).encode()


async def burst(url: str, requests: list[bytes]) -> list[tuple[float, int]]:
    """Open one connection per request, then send every request at once; time each until its status line.

    A raw-socket client, so that what is timed is the server, not an HTTP client library's overhead.
    """
    target = urlsplit(url)
    connections = await asyncio.gather(*(asyncio.open_connection(target.hostname, target.port) for _ in requests))

    async def one(connection, request: bytes) -> tuple[float, int]:
        reader, writer = connection
        started = time.perf_counter()
        writer.write(request)
        status_line = await reader.readline()
        elapsed = time.perf_counter() - started
        await reader.read()  # rest of the response; the server closes (connection: close)
        writer.close()
        return elapsed, int(status_line.split()[1])

    return await asyncio.gather(*(one(c, r) for c, r in zip(connections, requests)))


def burst_in_child(url: str, requests: list[bytes]) -> list[tuple[float, int]]:
    """Runs in a separate process: Slack is another machine, so the sender must not share our GIL."""
    return asyncio.run(burst(url, requests))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=50, help="distinct @mentions sent at once")
    ap.add_argument("--retries", type=int, default=1, help="re-deliveries of each event (same event_id)")
    ap.add_argument("--rate-limited", type=int, default=0,
                    help="the first N chat.postMessage calls of the burst get 429 Retry-After: 0")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for every answer")
    ap.add_argument("--answer-slots", type=int, default=None, help="answers computed at once [default: SlackConfig]")
    args = ap.parse_args()

    load_before = os.getloadavg()[0]
    with (
        FakeSlack() as fake,
        tempfile.TemporaryDirectory(prefix="hypa-slack-bench-") as tmp,
        running_bot(Path(tmp), fake) as bot,
    ):
        if args.answer_slots:
            bot.server.bot.config = replace(bot.server.bot.config, max_concurrent_answers=args.answer_slots)
        # Warm-up: one answered question, so start-up costs (auth.test, first SQLite connections,
        # term statistics) are not counted as ack latency.
        warm = envelope(mention_event(f"<@{BOT_USER_ID}> warm up: what is a widget audit?", channel="C0WARM"))
        bot.slack.send(warm)
        fake.wait_for(lambda: fake.calls_to("chat.update"), 30, "the warm-up answer")
        fake.reset()
        if args.rate_limited:
            fake.fail_next("chat.postMessage", status=429, retry_after=0, times=args.rate_limited)

        bodies = [
            envelope(mention_event(f"<@{BOT_USER_ID}> {QUESTIONS[i % len(QUESTIONS)]}", channel=f"C0BENCH{i % 5}"))
            for i in range(args.events)
        ]
        deliveries = [(b, None) for b in bodies] + [(b, n) for n in range(1, args.retries + 1) for b in bodies]
        with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as sender:
            sender.submit(burst_in_child, bot.slack.url, []).result()  # the child is up and imported
            requests = [signed_request(bot.slack, body, n) for body, n in deliveries]
            started = time.perf_counter()
            results = sender.submit(burst_in_child, bot.slack.url, requests).result()

        def every_thread_answered() -> bool:
            return all(
                any(m.edits for m in fake.thread(b["event"]["channel"], b["event"]["ts"])) for b in bodies
            )

        try:
            fake.wait_for(every_thread_answered, args.timeout, "every answer")
        except AssertionError:
            pass  # reported as missing below
        answered_s = time.perf_counter() - started
        fake.wait_quiet(0.5, timeout_s=30)

        per_thread = [fake.thread(b["event"]["channel"], b["event"]["ts"]) for b in bodies]
        answers = [sum(1 for m in msgs if m.edits) for msgs in per_thread]
        # Every successful post is stored by the fake; the other calls were answered 429.
        rate_limited = len(fake.calls_to("chat.postMessage")) - len(fake.messages)

    latencies = sorted(latency for latency, _ in results)
    statuses = {status for _, status in results}
    # The bot leaves exactly one message per question (the placeholder, edited into the answer);
    # anything more in a thread is a duplicate answer.
    duplicates = sum(max(0, len(msgs) - 1) for msgs in per_thread)
    missing = sum(1 for n in answers if n == 0)
    ms = [x * 1000 for x in latencies]
    print(f"load average before/after: {load_before:.1f} / {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    print(f"deliveries: {len(results)} ({args.events} events x {1 + args.retries} deliveries), statuses {sorted(statuses)}")
    print(f"ack latency ms: p50 {percentile(ms, 50):.1f}  p95 {percentile(ms, 95):.1f}  "
          f"p99 {percentile(ms, 99):.1f}  max {ms[-1]:.1f}")
    print(f"every answer posted within {answered_s:.2f} s of the burst (includes opening its connections)")
    print(f"duplicate answers: {duplicates}  missing answers: {missing}  (rate-limit retries: {rate_limited})")
    ok = percentile(ms, 99) <= 1000 and duplicates == 0 and missing == 0 and statuses == {200}
    print("targets (ack p99 <= 1 s, zero duplicates, none missing):", "met" if ok else "NOT met")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
