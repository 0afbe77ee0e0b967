"""Every documented query parameter of every list operation has its effect.

The list operations are those of hookd's live OpenAPI document that answer a page (`data`,
`iterator`, `done`); their parameters are the ones documented for that operation by hookd's
document or by either of Svix's (vendored in tests/compat/svix). Each (operation, parameter)
must have a probe below, or the test fails naming it, so a parameter added to any of the three
documents cannot go untested. A probe sends the parameter over plain HTTP to a hookd holding a
small known world (its own tenant) and asserts what it changes: the items a filter keeps, the
page `limit` and `iterator` make, the order `order` gives, the content `with_content` leaves out.
A parameter hookd refuses must be answered 422 naming it; none is accepted and ignored, except
those listed in `SAME_BY_DESIGN` with the reason the answer cannot differ.
"""

from __future__ import annotations

import gzip
import json
import re
import time
from datetime import datetime, timezone
from pathlib import Path

import httpx
import pytest

from conftest import Receiver

SVIX = Path(__file__).resolve().parent / "svix"


def shape(path: str) -> str:
    return re.sub(r"\{[^}]+\}", "{}", path)


def query_params(spec: dict) -> dict[str, set[str]]:
    """GET operations by path shape, each with the query parameters it documents."""
    out: dict[str, set[str]] = {}
    for path, item in spec["paths"].items():
        op = item.get("get")
        if op is None:
            continue
        params = op.get("parameters", []) + item.get("parameters", [])
        out[shape(path)] = {p["name"] for p in params if p.get("in") == "query"}
    return out


def list_operations(hookd_spec: dict) -> dict[str, str]:
    """hookd's GET operations answering a page: path shape -> path."""
    out = {}
    for path, item in hookd_spec["paths"].items():
        op = item.get("get")
        if op and '"iterator"' in json.dumps(resolve(hookd_spec, op["responses"].get("200", {}))):
            out[shape(path)] = path
    return out


def resolve(spec: dict, node, depth: int = 0):
    """`node` with its `$ref`s replaced (a few levels: enough to see a page's fields)."""
    if depth > 4:
        return node
    if isinstance(node, dict):
        if "$ref" in node:
            name = node["$ref"].rsplit("/", 1)[1]
            return resolve(spec, spec["components"]["schemas"][name], depth + 1)
        return {k: resolve(spec, v, depth + 1) for k, v in node.items()}
    if isinstance(node, list):
        return [resolve(spec, v, depth + 1) for v in node]
    return node


def when(item: dict) -> datetime:
    raw = item.get("timestamp") or item.get("createdAt")
    return datetime.fromisoformat(raw.replace("Z", "+00:00"))


def key(item: dict) -> str:
    return item.get("id") or item.get("name")


class World:
    """The objects the probes look at, made once in a tenant of their own."""

    def __init__(self, hookd) -> None:
        _, api_key = hookd.create_tenant(name="list-params", email="lists@compat.example")
        self.http = httpx.Client(
            base_url=hookd.base_url, headers={"Authorization": f"Bearer {api_key}"}, timeout=15.0
        )
        # Endpoint a refuses a message whose payload says "fail" with 400 (final: no retries),
        # so the lists hold both outcomes and do not change while the probes run.
        self.receiver = Receiver(
            answer=lambda r: 400 if r["path"] == "/a" and b'"fail"' in r["body"] else 200,
            reply=b'{"seen": true}')
        self.gone = Receiver(answer=lambda r: 410)
        url = self.receiver.url

        for name in ("lp.one", "lp.two", "lp.old"):
            self.post("/api/v1/event-type", {
                "name": name, "description": name,
                "schemas": {"1": {"type": "object", "examples": [{"n": 1}]}},
            })
        self.delete("/api/v1/event-type/lp.old")  # archived

        self.app = self.post("/api/v1/app", {"name": "lists"})["id"]
        a = self.app
        self.ep_a = self.post(f"/api/v1/app/{a}/endpoint", {"url": f"{url}/a"})["id"]
        self.ep_b = self.post(f"/api/v1/app/{a}/endpoint", {"url": f"{url}/b"})["id"]
        self.m1 = self.post(f"/api/v1/app/{a}/msg", {
            "eventType": "lp.one", "channels": ["ch1"], "tags": ["t1"], "payload": {"n": 1}})
        time.sleep(0.05)
        self.m2 = self.post(f"/api/v1/app/{a}/msg", {
            "eventType": "lp.two", "channels": ["ch2"], "tags": ["t2"],
            "payload": {"n": 2, "outcome": "fail"}})
        self.messages = {m["id"]: m for m in (self.m1, self.m2)}
        # Both messages reach both endpoints: m2 fails at a, every other delivery succeeds.
        self.receiver.wait_for("/a", 2)
        self.receiver.wait_for("/b", 2)
        self.settle(f"/api/v1/app/{a}/attempt/msg/{self.m2['id']}", 2)
        self.settle(f"/api/v1/app/{a}/attempt/msg/{self.m1['id']}", 2)
        # m2 sent again to a, later: its attempts are at two times.
        time.sleep(0.05)
        self.post(f"/api/v1/app/{a}/msg/{self.m2['id']}/endpoint/{self.ep_a}/resend", {})
        self.settle(f"/api/v1/app/{a}/attempt/msg/{self.m2['id']}", 3)
        # A third message, due in an hour, skipped at c: c's message list shows it canceled.
        self.ep_c = self.post(f"/api/v1/app/{a}/endpoint", {"url": f"{url}/c"})["id"]
        due = datetime.fromtimestamp(time.time() + 3600, timezone.utc)
        self.m3 = self.post(f"/api/v1/app/{a}/msg", {
            "eventType": "lp.one", "payload": {"n": 3},
            "deliverAt": due.isoformat().replace("+00:00", "Z")})
        self.messages[self.m3["id"]] = self.m3
        self.post(f"/api/v1/app/{a}/msg/{self.m3['id']}/endpoint/{self.ep_c}/skip", {})

        # Applications: one with no endpoint, one whose endpoints are disabled (a 410 disables
        # at once and emails the tenant: two emails for the email list).
        self.empty_app = self.post("/api/v1/app", {"name": "no endpoints"})["id"]
        self.gone_app = self.post("/api/v1/app", {"name": "all disabled"})["id"]
        for n in range(2):
            self.post(f"/api/v1/app/{self.gone_app}/endpoint", {"url": f"{self.gone.url}/{n}"})
        self.post(f"/api/v1/app/{self.gone_app}/msg", {"eventType": "lp.one", "payload": {}})
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            eps = self.get(f"/api/v1/app/{self.gone_app}/endpoint")["data"]
            if all(e.get("disabled") for e in eps):
                break
            time.sleep(0.1)

        for n in range(2):
            self.post(f"/api/v1/app/{a}/integration", {"name": f"integration {n}"})
            self.post("/api/v1/operational-webhook/endpoint", {"url": f"{url}/ops{n}"})
        self.source = self.post("/ingest/api/v1/source", {
            "name": "lists source", "type": "generic-webhook"})["id"]
        self.post("/ingest/api/v1/source", {"name": "another source", "type": "generic-webhook"})
        for n in range(2):
            self.post(f"/ingest/api/v1/source/{self.source}/endpoint", {"url": f"{url}/src{n}"})
        # Two kinds of background task.
        self.post(f"/api/v1/app/{a}/endpoint/{self.ep_a}/recover", {"since": "2026-01-01T00:00:00Z"})
        self.post(f"/api/v1/app/{a}/endpoint/{self.ep_b}/replay-missing",
                  {"since": "2026-01-01T00:00:00Z"})
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if all(t["status"] != "running" for t in self.get("/api/v1/background-task")["data"]):
                break
            time.sleep(0.1)

    def close(self) -> None:
        self.receiver.close()
        self.gone.close()
        self.http.close()

    def settle(self, path: str, count: int) -> None:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if len(self.get(path)["data"]) >= count:
                return
            time.sleep(0.05)
        raise AssertionError(f"{path}: fewer than {count} items after 20 s")

    def post(self, path: str, body: dict) -> dict:
        r = self.http.post(path, json=body)
        assert r.status_code in (200, 201, 202, 204), f"POST {path}: {r.status_code} {r.text}"
        return r.json() if r.content else {}

    def delete(self, path: str) -> None:
        r = self.http.delete(path)
        assert r.status_code == 204, f"DELETE {path}: {r.status_code} {r.text}"

    def get(self, path: str, params=None) -> dict:
        r = self.http.get(path, params=params)
        assert r.status_code == 200, f"GET {path} {params}: {r.status_code} {r.text}"
        return r.json()

    def path_for(self, template: str) -> str:
        """A real path for one of hookd's list operations."""
        values = {
            "app_id": self.app, "endpoint_id": self.ep_a, "msg_id": self.m2["id"],
            "source_id": self.source,
        }
        return re.sub(r"\{([^}]+)\}", lambda m: values[m.group(1)], template)


@pytest.fixture(scope="module")
def world(hookd):
    w = World(hookd)
    try:
        yield w
    finally:
        w.close()


# --- probes ---------------------------------------------------------------------------------
# Each takes (world, path, baseline items) and raises AssertionError saying what it saw.


def everything(w: World, path: str, **params) -> list[dict]:
    return w.get(path, {"limit": 250, **params})["data"]


def probe_limit(w, path, base):
    assert len(base) >= 2, f"needs two items, has {len(base)}"
    page = w.get(path, {"limit": 1})
    assert len(page["data"]) == 1 and page["done"] is False, page


def probe_iterator(w, path, base):
    first = w.get(path, {"limit": 1})
    second = w.get(path, {"limit": 1, "iterator": first["iterator"]})
    order = [key(i) for i in everything(w, path)]
    got = [key(first["data"][0]), key(second["data"][0])]
    assert order.index(got[1]) == order.index(got[0]) + 1, f"pages {got} in {order}"


def probe_order(w, path, base):
    asc = [key(i) for i in everything(w, path, order="ascending")]
    desc = [key(i) for i in everything(w, path, order="descending")]
    assert len(asc) >= 2 and asc == desc[::-1] and asc != desc, f"asc {asc} desc {desc}"


def time_probe(side: str):
    def probe(w, path, base):
        times = sorted({when(i) for i in base})
        assert len(times) >= 2, f"needs items at two times: {times}"
        cut = times[0] + (times[-1] - times[0]) / 2
        got = everything(w, path, **{side: cut.isoformat().replace("+00:00", "Z")})
        expected = [key(i) for i in base if (when(i) < cut if side == "before" else when(i) > cut)]
        assert [key(i) for i in got] == expected and 0 < len(expected) < len(base), (
            f"{side}={cut}: got {[key(i) for i in got]}, expected {expected}")
    return probe


def filter_probe(param: str, values, keeps):
    """`param=value` keeps exactly the baseline items `keeps(world, item, value)` says, for
    each value, and the values keep different items (so the filter visibly acts)."""
    def probe(w, path, base):
        kept = []
        for value in values(w, base) if callable(values) else values:
            got = sorted(key(i) for i in everything(w, path, **{param: value}))
            expected = sorted(key(i) for i in base if keeps(w, i, value))
            assert got == expected, f"{param}={value}: got {got}, expected {expected}"
            kept.append(got)
        assert any(k != kept[0] for k in kept), f"{param}: every value kept {kept[0]}"
    return probe


def message_of(w: World, item: dict) -> dict:
    """The message an item of a list is about (a message, or an attempt's message)."""
    return w.messages[item.get("msgId") or item["id"]]


def statuses(field: str):
    return lambda w, base: sorted({i[field] for i in base})


def content_probe(field: str, empty):
    """with_content=false leaves `field` out (or empty); true keeps it."""
    def probe(w, path, base):
        bare = everything(w, path, with_content="false")
        full = everything(w, path, with_content="true")
        assert bare and all(empty(i.get(field)) for i in bare), f"false: {bare[:2]}"
        assert any(not empty(i.get(field)) for i in full), f"true: {full[:2]}"
    return probe


def probe_with_msg(w, path, base):
    got = everything(w, path, with_msg="true")
    assert got and all(i.get("msg", {}).get("id") == i["msgId"] for i in got), got[:2]
    assert all("msg" not in i for i in everything(w, path)), "msg without with_msg"


def app_filter(param: str, keeps):
    """`param=true` leaves out the applications whose endpoints `keeps` refuses."""
    def probe(w, path, base):
        def endpoints(app_id):
            return w.get(f"/api/v1/app/{app_id}/endpoint")["data"]
        expected = sorted(key(a) for a in base if keeps(endpoints(key(a))))
        got = sorted(key(a) for a in everything(w, path, **{param: "true"}))
        assert got == expected and len(got) < len(base), f"got {got}, expected {expected}"
    return probe


def probe_include_archived(w, path, base):
    names = {i["name"] for i in base}
    with_archived = {i["name"] for i in everything(w, path, include_archived="true")}
    assert "lp.old" not in names and "lp.old" in with_archived, (names, with_archived)


def probe_expanded_statuses_endpoint_msgs(w, path, base):
    # The skipped delivery of m3 at c: 4 (canceled) by default and with true, 0 with false.
    c = f"/api/v1/app/{w.app}/endpoint/{w.ep_c}/msg"
    status = {v: {i["id"]: i["status"] for i in everything(w, c, expanded_statuses=v)}
              for v in ("true", "false")}
    m3 = w.m3["id"]
    assert status["true"].get(m3) == 4 and status["false"].get(m3) == 0, status


# Parameters whose answer cannot differ in hookd, and why (the README says the same).
SAME_BY_DESIGN = {
    ("/api/v1/app", "exclude_apps_with_svix_play_endpoints"):
        "hookd has no Svix Play endpoints, so there is nothing to leave out",
    ("/api/v1/app/{}/attempt/endpoint/{}", "expanded_statuses"):
        "hookd never makes a canceled attempt (a skipped delivery makes none)",
    ("/api/v1/app/{}/attempt/msg/{}", "expanded_statuses"):
        "hookd never makes a canceled attempt (a skipped delivery makes none)",
}

GENERIC = {
    "limit": probe_limit,
    "iterator": probe_iterator,
    "order": probe_order,
    "before": time_probe("before"),
    "after": time_probe("after"),
    "event_types": filter_probe(
        "event_types", ["lp.one", "lp.two"], lambda w, i, v: message_of(w, i)["eventType"] == v),
    "channel": filter_probe(
        "channel", ["ch1", "ch2"], lambda w, i, v: v in (message_of(w, i).get("channels") or [])),
    "tag": filter_probe(
        "tag", ["t1", "t2"], lambda w, i, v: v in (message_of(w, i).get("tags") or [])),
    "status": filter_probe("status", statuses("status"), lambda w, i, v: i["status"] == v),
}

SPECIFIC = {
    ("/api/v1/app", "exclude_apps_with_no_endpoints"): app_filter(
        "exclude_apps_with_no_endpoints", lambda eps: bool(eps)),
    ("/api/v1/app", "exclude_apps_with_disabled_endpoints"): app_filter(
        "exclude_apps_with_disabled_endpoints",
        lambda eps: not eps or not all(e.get("disabled") for e in eps)),
    ("/api/v1/app/{}/attempt/endpoint/{}", "status_code_class"): filter_probe(
        "status_code_class", [200, 400], lambda w, i, v: i["responseStatusCode"] // 100 * 100 == v),
    ("/api/v1/app/{}/attempt/msg/{}", "status_code_class"): filter_probe(
        "status_code_class", [200, 400], lambda w, i, v: i["responseStatusCode"] // 100 * 100 == v),
    ("/api/v1/app/{}/attempt/msg/{}", "endpoint_id"): filter_probe(
        "endpoint_id", lambda w, base: [w.ep_a, w.ep_b], lambda w, i, v: i["endpointId"] == v),
    ("/api/v1/app/{}/attempt/endpoint/{}", "with_content"): content_probe(
        "response", lambda v: v in (None, "", "{}")),
    ("/api/v1/app/{}/attempt/msg/{}", "with_content"): content_probe(
        "response", lambda v: v in (None, "", "{}")),
    ("/api/v1/app/{}/attempt/endpoint/{}", "with_msg"): probe_with_msg,
    ("/api/v1/app/{}/msg", "with_content"): content_probe("payload", lambda v: not v),
    ("/api/v1/app/{}/endpoint/{}/msg", "with_content"): content_probe("payload", lambda v: not v),
    ("/api/v1/app/{}/endpoint/{}/msg", "expanded_statuses"): probe_expanded_statuses_endpoint_msgs,
    ("/api/v1/event-type", "include_archived"): probe_include_archived,
    ("/api/v1/event-type", "with_content"): content_probe("schemas", lambda v: not v),
    ("/api/v1/background-task", "status"): filter_probe(
        "status", ["finished", "running"], lambda w, i, v: i["status"] == v),
    ("/api/v1/background-task", "task"): filter_probe(
        "task", statuses("task"), lambda w, i, v: i["task"] == v),
}


def probe_same(w, path, base, param, value="true"):
    same = everything(w, path, **{param: value})
    assert [key(i) for i in same] == [key(i) for i in base], "answer changed"


def test_every_documented_query_parameter_of_every_list_has_its_effect(hookd, world):
    hookd_spec = httpx.get(f"{hookd.base_url}/api/v1/openapi.json", timeout=15).json()
    documented = [query_params(hookd_spec)]
    for name in ("server-openapi.json.gz", "lib-openapi.json.gz"):
        with gzip.open(SVIX / name, "rt", encoding="utf-8") as f:
            documented.append(query_params(json.load(f)))

    lists = list_operations(hookd_spec)
    assert len(lists) >= 14, sorted(lists)
    checked, failures = 0, []
    for op, path in sorted(lists.items()):
        params = set().union(*(d.get(op, set()) for d in documented))
        real = world.path_for(path)
        for param in sorted(params):
            checked += 1
            try:
                base = everything(world, real)
                if (op, param) in SAME_BY_DESIGN:
                    probe_same(world, real, base, param)
                    continue
                probe = SPECIFIC.get((op, param)) or GENERIC.get(param)
                if probe is None:
                    raise AssertionError("no probe: add one (or a SAME_BY_DESIGN reason)")
                probe(world, real, base)
            except (AssertionError, LookupError, TypeError) as e:
                failures.append(f"GET {path} ?{param}: {type(e).__name__}: {e}")
    print(f"{checked} parameters of {len(lists)} list operations checked")
    assert not failures, "\n".join(failures)
