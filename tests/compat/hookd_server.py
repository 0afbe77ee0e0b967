"""Start and stop a throwaway hookd for black-box tests.

Used by conftest.py (pytest). By hand, to poke at a throwaway server:

    python3 tests/compat/hookd_server.py start DIR [HOOKD_X=Y ...]  # prints BASE_URL API_KEY PID
    python3 tests/compat/hookd_server.py stop DIR                   # SIGTERM, waits for exit

The binary is $HOOKD_BIN, or target/debug/hookd in the repository.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.parse
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LISTENING = re.compile(r"listening on (http://[0-9.]+:\d+)")

# Endpoints in the tests point at loopback; the SSRF guard refuses that unless allowed.
ALLOW_NETWORKS = "127.0.0.0/8,::1/128"


def hookd_bin() -> str:
    path = os.environ.get("HOOKD_BIN") or str(REPO / "target" / "debug" / "hookd")
    if not os.access(path, os.X_OK):
        raise RuntimeError(
            f"hookd binary not found at {path}: run `cargo build -p hookd` or set HOOKD_BIN"
        )
    return path


@dataclass
class Hookd:
    workdir: Path
    base_url: str
    api_key: str
    process: subprocess.Popen | None
    pid: int
    db_url: str

    def create_tenant(self, name: str = "compat", email: str = "ops@compat.example") -> tuple[str, str]:
        """Creates another tenant; returns (tenant_id, api_key)."""
        return create_tenant(self.workdir, name, email, self.db_url)

    def stop(self, timeout: float = 15.0) -> int:
        return stop_pid(self.pid, self.process, timeout)


# The keys compat servers on PostgreSQL seal endpoint secrets under (SQLite ones make their own
# key file beside the database, as a single-machine install does).
COMPAT_KEYS = "compat:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="


def database_url(workdir: Path, own: str | None = None) -> str:
    """`own` if given, else $HOOKD_COMPAT_DATABASE_URL (e.g. a fresh PostgreSQL database),
    else SQLite in workdir."""
    return (
        own
        or os.environ.get("HOOKD_COMPAT_DATABASE_URL")
        or f"sqlite://{workdir / 'data' / 'hookd.db'}"
    )


@contextlib.contextmanager
def own_postgres_database(server_url: str, name: str):
    """A PostgreSQL database of its own on `server_url`'s server, named `name`; yields its URL
    and drops it after. For a test whose process must be the only one on its database (servers
    sharing one database share its deliveries and endpoints' leases)."""
    subprocess.run(["psql", server_url, "-qAtc", f"CREATE DATABASE {name}"],
                   check=True, capture_output=True)
    parts = urllib.parse.urlsplit(server_url)
    try:
        yield urllib.parse.urlunsplit(parts._replace(path="/" + name))
    finally:
        subprocess.run(["psql", server_url, "-qAtc", f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"],
                       capture_output=True)


def _env(workdir: Path, extra: dict[str, str] | None, own_db: str | None = None) -> dict[str, str]:
    env = dict(os.environ)
    # Whatever the caller's shell has, this server is ours: no config leaks in.
    for k in list(env):
        if k.startswith("HOOKD_") and k not in ("HOOKD_BIN", "HOOKD_COMPAT_DATABASE_URL"):
            del env[k]
    env.update(
        {
            "HOOKD_BIND": "127.0.0.1:0",
            "HOOKD_DATABASE_URL": database_url(workdir, own_db),
            "HOOKD_ENDPOINT_ALLOW_NETWORKS": ALLOW_NETWORKS,
            "HOOKD_LOG_LEVEL": "info",
        }
    )
    if database_url(workdir, own_db).startswith("postgres"):
        # Every process on one PostgreSQL database seals secrets with the same keys.
        env["HOOKD_SECRET_KEYS"] = COMPAT_KEYS
    env.update(extra or {})
    return env


def create_tenant(workdir: Path, name: str, email: str, own_db: str | None = None) -> tuple[str, str]:
    db = database_url(workdir, own_db)
    out = subprocess.run(
        [hookd_bin(), "tenant", "create", "--name", name, "--email", email, "--json",
         "--database-url", db],
        cwd=workdir, env=_env(workdir, None, own_db), capture_output=True, text=True, timeout=60,
    )
    if out.returncode != 0:
        raise RuntimeError(f"hookd tenant create failed ({out.returncode}): {out.stderr.strip()}")
    # stdout is the JSON object (logs go to stderr); take the first line that parses.
    for line in out.stdout.splitlines():
        line = line.strip()
        if line.startswith("{"):
            doc = json.loads(line)
            return doc["tenant_id"], doc["api_key"]
    raise RuntimeError(f"no JSON in `hookd tenant create` output: {out.stdout!r}")


def start(workdir: Path, env: dict[str, str] | None = None, timeout: float = 60.0,
          detach: bool = False, own_db: str | None = None) -> Hookd:
    """Starts `hookd serve` in workdir (SQLite in workdir/data, or `own_db`, or the compat
    database: see `database_url`) and creates a tenant."""
    workdir = Path(workdir).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    log_path = workdir / "hookd.log"
    log = open(log_path, "wb")
    proc = subprocess.Popen(
        [hookd_bin(), "serve"], cwd=workdir, env=_env(workdir, env, own_db),
        stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
        start_new_session=detach,
    )
    log.close()
    deadline = time.monotonic() + timeout
    base_url = None
    while time.monotonic() < deadline:
        text = log_path.read_text(errors="replace")
        m = LISTENING.search(text)
        if m:
            base_url = m.group(1)
            break
        if proc.poll() is not None:
            raise RuntimeError(f"hookd serve exited with {proc.returncode}:\n{text}")
        time.sleep(0.05)
    if base_url is None:
        proc.terminate()
        raise RuntimeError(f"hookd did not report its port within {timeout}s:\n"
                           + log_path.read_text(errors="replace"))
    (workdir / "hookd.pid").write_text(str(proc.pid))
    _, api_key = create_tenant(workdir, "compat", "ops@compat.example", own_db)
    return Hookd(workdir, base_url, api_key, proc, proc.pid, database_url(workdir, own_db))


def stop_pid(pid: int, proc: subprocess.Popen | None = None, timeout: float = 15.0) -> int:
    """SIGTERM, then wait; SIGKILL only if it does not stop. Returns the exit code (or -1)."""
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return proc.wait() if proc else -1
    if proc is not None:
        try:
            return proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            return -9
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return 0
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)
    return -9


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] not in ("start", "stop"):
        print(__doc__, file=sys.stderr)
        return 2
    workdir = Path(argv[2])
    if argv[1] == "start":
        extra = dict(kv.split("=", 1) for kv in argv[3:])
        h = start(workdir, env=extra, detach=True)
        print(h.base_url, h.api_key, h.pid)
        return 0
    pid = int((workdir / "hookd.pid").read_text())
    code = stop_pid(pid)
    return 0 if code in (0, -1) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
