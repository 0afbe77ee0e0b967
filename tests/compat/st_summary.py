"""Lists every failed check of a schemathesis NDJSON report, one block per distinct
(operation, check, status, message), with the request and response that showed it.

    python3 tests/compat/st_summary.py REPORT.ndjson [--all]

Without --all, one example per distinct failure is shown; the count says how many there were.
"""

from __future__ import annotations

import base64
import json
import sys
from collections import OrderedDict


def _text(content) -> str:
    if content is None:
        return ""
    if isinstance(content, dict) and "$base64" in content:
        raw = base64.b64decode(content["$base64"])
        return raw.decode("utf-8", errors="replace")
    if isinstance(content, dict) and "string" in content:
        return content["string"]
    return str(content)


def _clip(s: str, n: int = 600) -> str:
    return s if len(s) <= n else s[:n] + f"… ({len(s)} chars)"


def main(path: str, show_all: bool) -> int:
    groups: "OrderedDict[tuple, list]" = OrderedDict()
    for line in open(path, encoding="utf-8"):
        event = json.loads(line)
        finished = event.get("ScenarioFinished")
        if not finished or finished.get("status") != "failure":
            continue
        rec = finished["recorder"]
        for case_id, checks in rec.get("checks", {}).items():
            inter = rec.get("interactions", {}).get(case_id) or {}
            req = inter.get("request") or {}
            resp = inter.get("response") or {}
            for check in checks:
                if check.get("status") != "failure":
                    continue
                f = (check.get("failure_info") or {}).get("failure") or {}
                op = f.get("operation") or rec.get("label")
                msg = (f.get("message") or "").strip()
                key = (op, check["name"], f.get("code"), resp.get("status_code"),
                       msg.splitlines()[0] if msg else "")
                groups.setdefault(key, []).append(
                    {
                        "phase": finished.get("phase"),
                        "title": f.get("title"),
                        "message": msg,
                        "method": req.get("method"),
                        "uri": req.get("uri"),
                        "req_body": _text(req.get("body")),
                        "status": resp.get("status_code"),
                        "resp_body": _text(resp.get("content")),
                    }
                )
    if not groups:
        print("schemathesis: no failed checks in the report")
        return 0
    print(f"schemathesis: {len(groups)} distinct failures")
    for i, (key, items) in enumerate(groups.items(), 1):
        op, check, code, status, _ = key
        print(f"\n--- {i}. {op}: {check} ({code}) x{len(items)}")
        for item in items if show_all else items[:1]:
            print(f"    {item['title']}: {item['message']}".replace("\n", " | "))
            print(f"    request:  {item['method']} {item['uri']}")
            if item["req_body"]:
                print(f"    body:     {_clip(item['req_body'])}")
            print(f"    response: {item['status']} {_clip(item['resp_body'])}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1], "--all" in sys.argv[2:]))
