"""Fixtures: one fresh hookd per test session (temp dir, port 0, loopback allowed), a tenant
made with the CLI, and the official Svix SDK pointed at it."""

from __future__ import annotations

import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import hookd_server  # noqa: E402
from svix.api import ApplicationIn, Svix, SvixOptions  # noqa: E402


@pytest.fixture(scope="session")
def hookd(tmp_path_factory):
    """The running server: a `hookd_server.Hookd` with base_url and api_key."""
    workdir = tmp_path_factory.mktemp("hookd")
    server = hookd_server.start(workdir)
    try:
        yield server
    finally:
        code = server.stop()
        if code != 0:
            log = (workdir / "hookd.log").read_text(errors="replace")
            pytest.fail(f"hookd exited with {code} on SIGTERM:\n{log[-4000:]}")


@pytest.fixture(scope="session")
def server(hookd):
    """(base_url, api_key) of the session's hookd and its first tenant."""
    return hookd.base_url, hookd.api_key


def make_client(base_url: str, api_key: str) -> Svix:
    # No retries: a 5xx must surface as a failure, not be retried into a pass.
    return Svix(api_key, SvixOptions(server_url=base_url, retry_schedule=[], timeout=10.0))


@pytest.fixture
def svix(server) -> Svix:
    base_url, api_key = server
    return make_client(base_url, api_key)


@pytest.fixture
def other_svix(hookd) -> Svix:
    """A client for a second tenant of the same server."""
    _, key = hookd.create_tenant(name="other", email="other@compat.example")
    return make_client(hookd.base_url, key)


@pytest.fixture
def uniq() -> str:
    return uuid.uuid4().hex[:12]


@pytest.fixture
def app(svix, uniq):
    """A fresh application for one test."""
    return svix.application.create(ApplicationIn(name=f"compat-{uniq}", uid=f"app-{uniq}"))


class Receiver:
    """A receiver on loopback: records every POST and answers 200, or what `answer(request)`
    returns for it (the request dict as recorded; called under the lock), with `reply`."""

    def __init__(self, answer=None, reply: bytes = b"{}") -> None:
        self.requests: list[dict] = []
        self.lock = threading.Lock()
        self.url = ""
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                request = {
                    "path": self.path,
                    "headers": {k.lower(): v for k, v in self.headers.items()},
                    "body": body,
                }
                with receiver.lock:
                    receiver.requests.append(request)
                    status = answer(request) if answer else 200
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def received(self, path: str) -> list[dict]:
        with self.lock:
            return [r for r in self.requests if r["path"] == path]

    def wait_for(self, path: str, count: int = 1, timeout: float = 10.0) -> list[dict]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            got = self.received(path)
            if len(got) >= count:
                return got
            time.sleep(0.05)
        return self.received(path)

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture(scope="session")
def receiver():
    r = Receiver()
    try:
        yield r
    finally:
        r.close()


@pytest.fixture
def base_port(receiver) -> int:
    """The port endpoints point at: the loopback receiver (answers 200 to everything)."""
    return receiver.port
