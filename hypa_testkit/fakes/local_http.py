"""What the fake HTTP APIs in hypa_testkit/fakes share: a ThreadingHTTPServer on 127.0.0.1 in a daemon thread.

A fake subclasses `LocalHTTPFake` (start()/stop(), or use it as a context manager) and answers requests
with a subclass of `FakeAPIHandler` whose `handle_request()` reads the body with `read_body()` and
answers with `send_payload()`.
"""
from __future__ import annotations

import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Self


class FakeAPIHandler(BaseHTTPRequestHandler):
    """GET and POST both go to `handle_request()`; nothing is logged to stderr."""

    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:  # silences stderr
        pass

    def do_GET(self) -> None:
        self.handle_request()

    def do_POST(self) -> None:
        self.handle_request()

    def handle_request(self) -> None:
        raise NotImplementedError

    def read_body(self) -> bytes:
        length = int(self.headers.get("content-length") or 0)
        return self.rfile.read(length) if length else b""

    def send_payload(self, status: int, payload: bytes, content_type: str, headers: dict[str, str] | None = None) -> None:
        try:
            self.send_response(status)
            self.send_header("content-type", content_type)
            self.send_header("content-length", str(len(payload)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError, OSError):
            pass  # the client gave up (timeout) before the reply


class _QuietServer(ThreadingHTTPServer):
    """A client that dies mid-request (a bot process killed with SIGKILL) is not an error of the fake."""

    def handle_error(self, request, client_address) -> None:  # noqa: ANN001
        if not isinstance(sys.exc_info()[1], (ConnectionResetError, BrokenPipeError)):
            super().handle_error(request, client_address)


class LocalHTTPFake:
    """Serves `_make_handler()` on a free 127.0.0.1 port from start() until stop()."""

    thread_name = "fake-http"
    _server: ThreadingHTTPServer | None = None
    _thread: threading.Thread | None = None

    def _make_handler(self) -> type[BaseHTTPRequestHandler]:
        raise NotImplementedError

    def _release_waiters(self) -> None:
        """Called first by stop(): wake handlers that are blocked (scripted delays, long polls)."""

    @property
    def origin(self) -> str:
        """"http://127.0.0.1:PORT" while running."""
        assert self._server is not None, f"{type(self).__name__} is not running"
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> Self:
        self._server = _QuietServer(("127.0.0.1", 0), self._make_handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, name=self.thread_name, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._release_waiters()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
