"""Creates the objects schemathesis's fixed path parameters point at, and prints them as
`NAME=value` lines for scripts/compat (read into the environment; schemathesis.toml refers
to them as ${NAME}).

    python3 tests/compat/st_fixtures.py BASE_URL API_KEY

Two sets: one that every operation but DELETE uses (so it survives the run), and one that
the DELETE operations may remove. Plain HTTP here, not the SDK: this is setup, not a test.
"""

from __future__ import annotations

import secrets
import sys

import httpx


def main(base_url: str, api_key: str) -> int:
    c = httpx.Client(
        base_url=f"{base_url}/api/v1",
        headers={"Authorization": f"Bearer {api_key}"},
        timeout=10.0,
    )

    def post(path: str, body: dict) -> dict:
        # Paths of Svix's Ingest API start at the root, the rest under /api/v1.
        r = c.post(f"{base_url}{path}" if path.startswith("/ingest/") else path, json=body)
        if r.status_code not in (200, 201, 202):
            raise SystemExit(f"st_fixtures: POST {path} -> {r.status_code} {r.text}")
        return r.json()

    port = base_url.rsplit(":", 1)[1]
    run = secrets.token_hex(3)
    out: dict[str, str] = {}
    for suffix, label in (("", "keep"), ("_DEL", "delete")):
        app = post("/app", {"name": f"schemathesis {label}"})
        ep = post(f"/app/{app['id']}/endpoint",
                  {"url": f"http://127.0.0.1:{port}/st/{label}", "description": label})
        msg = post(f"/app/{app['id']}/msg",
                   {"eventType": "st.fixture", "eventId": f"st-{label}", "payload": {"k": label}})
        # A name of its own each run: scripts/compat makes fixtures once per pass.
        et = post("/event-type", {"name": f"st.{label}.{run}", "description": label})
        out[f"HOOKD_ST_APP{suffix}"] = app["id"]
        out[f"HOOKD_ST_EP{suffix}"] = ep["id"]
        out[f"HOOKD_ST_MSG{suffix}"] = msg["id"]
        out[f"HOOKD_ST_ET{suffix}"] = et["name"]
        ops = post("/operational-webhook/endpoint",
                   {"url": f"http://127.0.0.1:{port}/st/ops-{label}", "description": label})
        out[f"HOOKD_ST_OPS_EP{suffix}"] = ops["id"]
        integ = post(f"/app/{app['id']}/integration", {"name": label})
        out[f"HOOKD_ST_INTEG{suffix}"] = integ["id"]
        task = post(f"/app/{app['id']}/endpoint/{ep['id']}/recover",
                    {"since": "2026-01-01T00:00:00Z"})
        out[f"HOOKD_ST_TASK{suffix}"] = task["id"]
        src = post("/ingest/api/v1/source",
                   {"name": f"schemathesis {label}", "type": "generic-webhook"})
        out[f"HOOKD_ST_SRC{suffix}"] = src["id"]
        src_ep = post(f"/ingest/api/v1/source/{src['id']}/endpoint",
                      {"url": f"http://127.0.0.1:{port}/st/src-{label}", "description": label})
        out[f"HOOKD_ST_SRC_EP{suffix}"] = src_ep["id"]
    for k, v in out.items():
        print(f"{k}={v}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1], sys.argv[2]))
