"""What the tests (tests/) and the benchmarks (bench/) both run against; never shipped in the wheel.

fakes/         local fakes of Slack, Telegram, Anthropic and Weaviate on 127.0.0.1, driven by the real
               client libraries (slack-bolt/slack_sdk, python-telegram-bot, anthropic, weaviate-client)
toy.py         the toy regulation (synthetic chunks) and a model-free pipeline and service over it
postgres.py    a fresh PostgreSQL database per run on HYPA_TEST_POSTGRES_URL's server
slack_harness.py  the Slack bot built like `hypa serve slack`, over the toy index, served by uvicorn
crash_bot.py   a chat bot in its own process that a test or bench can SIGKILL and restart

bench/ imports from here, never from tests/ (tests/test_layers.py checks it), so a benchmark does not
depend on test modules; hypa's own packages (bot, core, storage, adapters) import nothing from here.
"""
