"""A chat bot in its own process, built like `hypa serve slack|telegram`, that a test can SIGKILL.

    python -m hypa_testkit.crash_bot slack    --data-dir D --api-base URL --port-file F [--answer-delay S]
    python -m hypa_testkit.crash_bot telegram --data-dir D --api-base URL --port-file F [--answer-delay S]
    ... [--set SETTING=VALUE ...]   (any Settings field, e.g. --set anthropic_base_url=http://…)

Real everything (Components, the stored conversation service on SQLite or HYPA_DATABASE_URL,
slack-bolt / python-telegram-bot, uvicorn) over the toy index with the model-free embedder, against
a fake platform API (hypa_testkit/fakes). `--answer-delay` makes every answer take that long, so a kill lands
"mid-answer". The HTTP port (health, metrics, Slack events) is chosen by the OS and written to
`--port-file` once the server listens. `CrashBot` starts, kills and restarts it from a test or bench.
"""
from __future__ import annotations

import argparse
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent


class SlowGenerator:
    """The real generator, after a pause (a slow language model)."""

    def __init__(self, inner, delay_s: float) -> None:
        self.inner, self.delay_s = inner, delay_s

    def generate(self, question, contexts, history=(), query_vector=None, asked=None, asking_vectors=None):
        time.sleep(self.delay_s)
        return self.inner.generate(question, contexts, history, query_vector, asked=asked)


def _serve(args: argparse.Namespace) -> None:
    import uvicorn

    from bot.metrics import Metrics
    from bot.serve_chat import build_server
    from hypa_testkit.slack_harness import toy_components, toy_settings

    overrides = {"delivery_lease_s": args.lease, "database_url": args.database_url}
    overrides |= dict(item.split("=", 1) for item in args.set)  # strings: Settings converts them
    if args.platform == "telegram":
        from hypa_testkit.fakes.telegram_server import TOKEN

        overrides |= {"telegram_bot_token": TOKEN, "telegram_api_base_url": args.api_base}
    settings = toy_settings(Path(args.data_dir), args.api_base, **overrides)
    components = toy_components(settings)
    if args.answer_delay > 0:
        components.pipeline.generator = SlowGenerator(components.pipeline.generator, args.answer_delay)
    # Built as `hypa serve` builds it (bot.serve_chat.build_server); serving is uvicorn on a socket of our own.
    if args.platform == "slack":
        from bot.serve_slack import PLATFORM as platform
    else:
        from bot.serve_telegram import PLATFORM as platform
    app = build_server(platform.build_server, platform.config(settings), components, Metrics()).http_app
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, lifespan="on", log_level="warning", access_log=False, log_config=None))
    Path(args.port_file).write_text(str(sock.getsockname()[1]))
    server.run(sockets=[sock])


class CrashBot:
    """One bot process: start() waits until it serves /healthz; kill() is SIGKILL; stop() is SIGTERM."""

    def __init__(
        self, platform: str, data_dir: Path, api_base: str, *, answer_delay_s: float = 0.0, lease_s: float = 1.0,
        database_url: str = "", log_path: Path | None = None, settings: dict[str, object] | None = None,
    ) -> None:
        self.platform, self.data_dir, self.api_base = platform, data_dir, api_base
        self.answer_delay_s, self.lease_s, self.database_url = answer_delay_s, lease_s, database_url
        self.settings = dict(settings or {})  # more Settings fields, passed as --set name=value
        self.log_path = log_path or data_dir / f"{platform}-bot.log"
        self.process: subprocess.Popen | None = None
        self.base_url = ""

    def start(self, timeout_s: float = 60.0) -> CrashBot:
        port_file = self.data_dir / f"{self.platform}.port"
        port_file.unlink(missing_ok=True)
        command = [
            sys.executable, "-m", "hypa_testkit.crash_bot", self.platform, "--data-dir", str(self.data_dir),
            "--api-base", self.api_base, "--port-file", str(port_file), "--answer-delay", str(self.answer_delay_s),
            "--lease", str(self.lease_s), "--database-url", self.database_url,
        ]
        for name, value in self.settings.items():
            command += ["--set", f"{name}={value}"]
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the {self.platform} bot exited ({self.process.returncode}); see {self.log_path}")
            if port_file.exists() and port_file.read_text():
                self.base_url = f"http://127.0.0.1:{port_file.read_text()}"
                try:
                    if httpx.get(f"{self.base_url}/healthz", timeout=1).status_code == 200:
                        return self
                except httpx.HTTPError:
                    pass
            time.sleep(0.05)
        self.kill()
        raise RuntimeError(f"the {self.platform} bot did not start within {timeout_s:.0f} s; see {self.log_path}")

    def kill(self) -> None:
        """SIGKILL: no shutdown code runs (nothing drained, nothing completed, leases left behind)."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=10)

    def stop(self, timeout_s: float = 30.0) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                self.kill()

    def __enter__(self) -> CrashBot:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("platform", choices=["slack", "telegram"])
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--api-base", required=True)
    parser.add_argument("--port-file", required=True)
    parser.add_argument("--answer-delay", type=float, default=0.0)
    parser.add_argument("--lease", type=float, default=1.0)
    parser.add_argument("--database-url", default="")
    parser.add_argument("--set", action="append", default=[], metavar="SETTING=VALUE")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)
    _serve(args)


if __name__ == "__main__":
    main()
