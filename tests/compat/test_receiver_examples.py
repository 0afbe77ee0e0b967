"""The README's receiving pattern, run as written (examples/receive_inbox.py): hookd delivers to
it through the official Svix SDK's calls, the example verifies with the `standardwebhooks`
package, dedups insert-first and hands off; a resend is acknowledged and not handled again, a
forged request is refused."""

from __future__ import annotations

import base64
import os
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
from svix.api import EndpointIn, MessageIn

import hookd_server

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def start_example(cmd: list[str], env: dict[str, str]) -> tuple[subprocess.Popen, list[str], int]:
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env={**os.environ, **env}
    )
    lines: list[str] = []

    def read():
        for line in proc.stdout:
            lines.append(line.rstrip("\n"))

    threading.Thread(target=read, daemon=True).start()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if lines and lines[0].startswith("listening on "):
            return proc, lines, int(lines[0].split()[-1])
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    proc.kill()
    raise AssertionError(f"the example did not start: {lines}")


def handled(lines: list[str]) -> list[str]:
    return [line.split()[1] for line in lines if line.startswith("handled ")]


def exercise(svix, server, app, uniq, cmd: list[str], env: dict[str, str]) -> list[str]:
    """Delivers three messages and a resend to the example; returns the event ids it handled."""
    secret = "whsec_" + base64.b64encode(os.urandom(24)).decode()
    proc, lines, port = start_example(cmd, {**env, "WEBHOOK_SECRET": secret})
    try:
        ep = svix.endpoint.create(app.id, EndpointIn(url=f"http://127.0.0.1:{port}/hook", secret=secret))
        msgs = [
            svix.message.create(app.id, MessageIn(event_type="inbox.check", payload={"n": n, "u": uniq}))
            for n in range(3)
        ]
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and len(handled(lines)) < 3:
            time.sleep(0.05)
        # A resend delivers the first message again: acknowledged (200), not handled twice.
        svix.message_attempt.resend(app.id, msgs[0].id, ep.id)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            attempts = svix.message_attempt.list_by_msg(app.id, msgs[0].id).data
            if sum(1 for a in attempts if a.response_status_code == 200) >= 2:
                break
            time.sleep(0.1)
        else:
            raise AssertionError("the resend was not acknowledged")
        # A forged request: refused, not handled.
        forged = httpx.post(
            f"http://127.0.0.1:{port}/hook",
            content=b'{"n": 99}',
            headers={
                "webhook-id": "msg_forged",
                "webhook-timestamp": str(int(time.time())),
                "webhook-signature": "v1,AAAA",
            },
        )
        assert forged.status_code == 401
        time.sleep(0.5)
        got = handled(lines)
        assert sorted(got) == sorted(m.id for m in msgs), lines
        return got
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_the_python_example_handles_each_event_once(svix, server, app, uniq, tmp_path):
    db = tmp_path / "inbox.db"
    exercise(
        svix, server, app, uniq,
        [sys.executable, str(EXAMPLES / "receive_inbox.py"), "0", str(db)], {},
    )
    rows = sqlite3.connect(db).execute("SELECT COUNT(*) FROM webhook_inbox").fetchone()[0]
    assert rows == 3


def test_the_node_example_handles_each_event_once(svix, server, app, uniq):
    import shutil

    import pytest

    node = shutil.which("node")
    assert node, "node is not installed: the Node example cannot run"
    js = Path(__file__).resolve().parent / "js"
    assert (js / "node_modules" / "pg").is_dir(), f"run `npm ci` in {js} (scripts/test does)"
    url = os.environ.get("HOOKD_TEST_POSTGRES_URL")
    if not url:
        pytest.skip("SKIPPED the Node receiver example: it keeps its inbox in PostgreSQL and HOOKD_TEST_POSTGRES_URL is not set")
    # Run from beside the pinned packages, as a user's project would.
    copy = js / "receive_inbox.example.mjs"
    shutil.copy(EXAMPLES / "receive_inbox.mjs", copy)
    try:
        # A database of its own, dropped after: the example creates its inbox table there.
        with hookd_server.own_postgres_database(url, f"hookd_inbox_{uniq}") as own:
            got = exercise(svix, server, app, uniq, [node, str(copy), "0"], {"DATABASE_URL": own})
            rows = subprocess.run(
                ["psql", own, "-qAtc", "SELECT COUNT(*) FROM webhook_inbox"],
                capture_output=True, text=True, check=True,
            ).stdout.strip()
            assert rows == "3", got
    finally:
        copy.unlink()
