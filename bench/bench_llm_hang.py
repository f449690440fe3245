"""Time to the first visible answer in Slack when the Anthropic endpoint accepts connections and never answers.

    .venv/bin/python bench/bench_llm_hang.py [--askers 6] [--spread-s 3] [--wait-s 8]

The real Slack app (`build_slack_server`: bolt, uvicorn, SQLite store; toy index and model-free
embedder, as in bench_slack_ack.py) with ANTHROPIC_API_KEY set and the Anthropic base URL pointing at
the fake in hypa_testkit/fakes/anthropic_server.py answering every request with `never_answers()`. Client
settings are the defaults (HYPA_LLM_TIMEOUT_S 30, HYPA_LLM_TOTAL_BUDGET_S 60, 2 retries, circuit after
5 failures). `--askers` people @mention the bot, spread over `--spread-s` seconds; reported: for each,
the time from sending the mention to the first chat.update (the first answer a person can read), the
Claude calls made, and the circuit breaker's state. `--wait-s` is HYPA_CHAT_ANSWER_WAIT_S; a large
value (e.g. 1000) shows the behaviour without the bound: each asker waits out the client's budget.
Target (issue 13): first visible answer <= 10 s.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from core.eval.metrics import percentile  # noqa: E402 - after sys.path has the checkout
from hypa_testkit.fakes.anthropic_server import FakeAnthropic, never_answers  # noqa: E402 - after sys.path has the checkout
from hypa_testkit.fakes.slack_server import BOT_USER_ID, FakeSlack, block_texts, envelope, mention_event  # noqa: E402 - after sys.path has the checkout
from hypa_testkit.slack_harness import running_bot  # noqa: E402 - after sys.path has the checkout

QUESTION = "What is the civil penalty for a first violation?"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--askers", type=int, default=6, help="people asking")
    ap.add_argument("--spread-s", type=float, default=3.0, help="their mentions are spread over this long")
    ap.add_argument("--wait-s", type=float, default=8.0, help="HYPA_CHAT_ANSWER_WAIT_S")
    ap.add_argument("--timeout", type=float, default=180.0, help="seconds to wait for every first answer")
    args = ap.parse_args()

    with (
        FakeAnthropic(default=never_answers()) as anthropic,
        FakeSlack() as slack,
        tempfile.TemporaryDirectory(prefix="hypa-hang-bench-") as tmp,
        running_bot(Path(tmp), slack, anthropic_api_key="bench-key", anthropic_base_url=anthropic.base_url,
                    chat_answer_wait_s=args.wait_s) as bot,
    ):
        events = [mention_event(f"<@{BOT_USER_ID}> {QUESTION} (asker {i})", channel=f"C0ASK{i}") for i in range(args.askers)]
        sent_at: dict[str, float] = {}
        first_seen: dict[str, float] = {}
        started = time.monotonic()
        pending = list(events)
        while len(first_seen) < len(events) and time.monotonic() - started < args.timeout:
            now = time.monotonic()
            while pending and now - started >= args.spread_s * (len(events) - len(pending)) / max(1, len(events)):
                e = pending.pop(0)
                sent_at[e["ts"]] = time.monotonic()
                bot.slack.send(envelope(e))
            for e in events:
                if e["ts"] in sent_at and e["ts"] not in first_seen:
                    if any(m.edits for m in slack.thread(e["channel"], e["ts"])):
                        first_seen[e["ts"]] = time.monotonic()
            time.sleep(0.02)
        waits = sorted(first_seen[ts] - sent_at[ts] for ts in first_seen)
        notes = []
        for e in events:
            shown = [m for m in slack.thread(e["channel"], e["ts"]) if m.edits]
            if shown:
                notes.append(next((t for t in block_texts(shown[0].blocks) if "Claude" in t), "(no note)"))
        breaker = bot.components.generator.primary.client.breaker  # Claude's circuit breaker
        calls = len(anthropic.message_requests)
        anthropic.release_held()  # let the hung calls end, so the bot shuts down at once

    print(f"{args.askers} askers over {args.spread_s:g} s; HYPA_CHAT_ANSWER_WAIT_S={args.wait_s:g}; "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    if waits:
        print(f"first visible answer s: p50 {percentile(waits, 50):.1f}  max {waits[-1]:.1f}  "
              f"(each: {', '.join(f'{w:.1f}' for w in waits)})")
    print(f"answered: {len(waits)} of {args.askers}; Claude calls made: {calls}; circuit breaker: {breaker.state}")
    for note in dict.fromkeys(notes):
        print(f"  note shown: {note}")
    ok = len(waits) == args.askers and waits[-1] <= 10.0
    print("target (first visible answer <= 10 s for every asker):", "met" if ok else "NOT met")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
