"""Creates the objects schemathesis's fixed path parameters point at, and prints them as
`NAME=value` lines for scripts/compat (read into the environment; schemathesis.toml refers
to them as ${NAME}).

    python3 tests/compat/st_fixtures.py BASE_URL API_KEY

Two sets: one that every operation but DELETE uses (so it survives the run), and one that
the DELETE operations may remove. Plain HTTP here, not the SDK: this is setup, not a test.
"""

from __future__ import annotations

import sys

import httpx


def main(base_url: str, api_key: str) -> int:
    c = httpx.Client(
        base_url=f"{base_url}/api/v1",
        headers={"Authorization": f"Bearer {api_key}"},
        timeout=10.0,
    )

    def post(path: str, body: dict) -> dict:
        r = c.post(path, json=body)
        if r.status_code not in (200, 201, 202):
            raise SystemExit(f"st_fixtures: POST {path} -> {r.status_code} {r.text}")
        return r.json()

    port = base_url.rsplit(":", 1)[1]
    out: dict[str, str] = {}
    for suffix, label in (("", "keep"), ("_DEL", "delete")):
        app = post("/app", {"name": f"schemathesis {label}"})
        ep = post(f"/app/{app['id']}/endpoint",
                  {"url": f"http://127.0.0.1:{port}/st/{label}", "description": label})
        msg = post(f"/app/{app['id']}/msg",
                   {"eventType": "st.fixture", "eventId": f"st-{label}", "payload": {"k": label}})
        et = post("/event-type", {"name": f"st.{label}", "description": label})
        out[f"HOOKD_ST_APP{suffix}"] = app["id"]
        out[f"HOOKD_ST_EP{suffix}"] = ep["id"]
        out[f"HOOKD_ST_MSG{suffix}"] = msg["id"]
        out[f"HOOKD_ST_ET{suffix}"] = et["name"]
        ops = post("/operational-webhook/endpoint",
                   {"url": f"http://127.0.0.1:{port}/st/ops-{label}", "description": label})
        out[f"HOOKD_ST_OPS_EP{suffix}"] = ops["id"]
    for k, v in out.items():
        print(f"{k}={v}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1], sys.argv[2]))
