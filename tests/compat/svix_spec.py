"""Svix's own OpenAPI documents, narrowed to what hookd implements, for schemathesis.

    python3 tests/compat/svix_spec.py server|cloud HOOKD_BASE_URL OUT.json
    python3 tests/compat/svix_spec.py readme HOOKD_BASE_URL    (the README's operation list)

`server` is Svix's open-source server's document, `cloud` the one Svix's SDKs are generated
from (both vendored in tests/compat/svix/, MIT, see README there). The output keeps every
operation of that document that hookd's live document (`/api/v1/openapi.json`) also has, same
method and path, and nothing else; the operations left out are listed on stderr.

Every rule is kept as Svix wrote it but these, each printed when applied (README, Svix
compatibility, says why for each):
- where Svix's two documents disagree, hookd follows the server's: the cloud document's id
  patterns (`^app_[A-Za-z0-9]{27}$` and the like, with the length bounds beside them: Svix's
  KSUID spelling) are dropped, as the server document puts none on ids; hookd's ids are ULIDs
  (`app_` + 26 characters);
- the server document leaves `app_id` undeclared on four operations of `/api/v1/app/{app_id}`:
  it is declared, as on the fifth, so that they can be tested at all;
- where the server document is only older or shorter than the cloud one — an enum without a
  value the cloud document added (`canceled`, 4), an operation with no success status at all,
  error statuses it leaves out (no 400 anywhere, though Svix's server answers 400 to a query
  string it cannot read; `POST /auth/logout` lists 204 alone) — the cloud document's are used;
- `KNOWN_STATUS`: the operations where hookd deliberately answers 200 where both documents
  say 204 (Svix's own server answers health with 200; the Python SDK reads the rotated secret
  from the body).
"""

import copy
import gzip
import json
import re
import sys
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent / "svix"
METHODS = ("get", "put", "post", "delete", "patch", "head")
# An id pattern of Svix's: a prefix, an underscore, then a fixed count of base62 characters.
ID_PATTERN = re.compile(r"^\^\(?[a-z]+_?\)?\[A-Za-z0-9\]\{\d+(,\d+)?\}\$$")


def load(which: str) -> dict:
    name = {"server": "server-openapi.json.gz", "cloud": "lib-openapi.json.gz"}[which]
    with gzip.open(HERE / name, "rt", encoding="utf-8") as f:
        return json.load(f)


def shape(path: str) -> str:
    """A path with its parameter names left out: `/api/v1/app/{}/msg/{}`."""
    return re.sub(r"\{[^}]+\}", "{}", path)


def operations(spec: dict) -> set[tuple[str, str]]:
    return {
        (method, shape(path))
        for path, item in spec.get("paths", {}).items()
        for method in item
        if method in METHODS
    }


def drop_id_patterns(node) -> int:
    """Removes Svix's id patterns in place; returns how many were removed."""
    removed = 0
    if isinstance(node, dict):
        pattern = node.get("pattern")
        if isinstance(pattern, str) and ID_PATTERN.match(pattern):
            # The length bounds beside the pattern spell the same 27 characters.
            for rule in ("pattern", "minLength", "maxLength"):
                node.pop(rule, None)
            removed += 1
        for value in node.values():
            removed += drop_id_patterns(value)
    elif isinstance(node, list):
        for value in node:
            removed += drop_id_patterns(value)
    return removed


# (method, path, status hookd answers instead of the documented 204, why)
KNOWN_STATUS = [
    ("get", "/api/v1/health", "200", "Svix's server answers 200 with a JSON report"),
    ("head", "/api/v1/health", "200", "as GET"),
    (
        "post",
        "/api/v1/app/{app_id}/endpoint/{endpoint_id}/secret/rotate",
        "200",
        "the Python SDK 2.9.1 reads the new secret from the body",
    ),
    (
        "post",
        "/ingest/api/v1/source/{source_id}/endpoint/{endpoint_id}/secret/rotate",
        "200",
        "the same handler as an application endpoint's rotate",
    ),
]


def from_cloud(spec: dict) -> list[str]:
    """The server document's gaps filled from the cloud one: enums the cloud document extends,
    and operations that list no success status."""
    cloud = load("cloud")
    done = []
    theirs = cloud["components"]["schemas"]
    for name, schema in spec.get("components", {}).get("schemas", {}).items():
        newer = theirs.get(name, {}).get("enum")
        if "enum" in schema and newer and set(schema["enum"]) < set(newer):
            done.append(f"enum {name}: {schema['enum']} -> {newer} (as the cloud document)")
            schema["enum"] = newer
    for path, item in spec["paths"].items():
        for method, op in item.items():
            if method not in METHODS:
                continue
            mine = op.setdefault("responses", {})
            other = cloud["paths"].get(path, {}).get(method, {}).get("responses", {})
            # A success status only where the server document lists none (else they disagree,
            # and the server's stands); error statuses wherever it leaves them out.
            has_success = any(k.startswith("2") for k in mine)
            added = [
                status for status in other
                if status not in mine and (not status.startswith("2") or not has_success)
            ]
            for status in added:
                mine[status] = other[status]
            if added:
                done.append(f"{', '.join(added)} listed on {method.upper()} {path} (as the cloud document)")
    return done


def repair(spec: dict, which: str) -> list[str]:
    """Applies the changes listed at the top; returns what was changed."""
    done = from_cloud(spec) if which == "server" else []
    patterns = drop_id_patterns(spec)
    if patterns:
        done.append(f"{patterns} id patterns dropped (the server document has none)")
    for path, item in spec["paths"].items():
        declared = [p.get("name") for p in item.get("parameters", [])]
        for method, op in item.items():
            if method not in METHODS:
                continue
            names = declared + [p.get("name") for p in op.get("parameters", []) if "name" in p]
            for name in re.findall(r"\{([^}]+)\}", path):
                if name not in names:
                    op.setdefault("parameters", []).append(
                        {"in": "path", "name": name, "required": True, "schema": {"type": "string"}}
                    )
                    done.append(f"path parameter {name} declared on {method.upper()} {path}")
    for method, path, status, why in KNOWN_STATUS:
        op = spec["paths"].get(path, {}).get(method)
        if op and status not in op["responses"]:
            op["responses"][status] = {"description": why}
            done.append(f"{status} accepted on {method.upper()} {path}: {why}")
    return done


def narrowed(spec: dict, hookd_ops: set[tuple[str, str]]) -> tuple[dict, list[str]]:
    """The spec with only hookd's operations; and the ones left out, as `METHOD /path`."""
    out = copy.deepcopy(spec)
    left_out = []
    for path, item in list(out["paths"].items()):
        for method in [m for m in item if m in METHODS]:
            if (method, shape(path)) not in hookd_ops:
                left_out.append(f"{method.upper()} {path}")
                del item[method]
        if not any(m in METHODS for m in item):
            del out["paths"][path]
    return out, left_out


def operations_table(hookd_ops: set[tuple[str, str]]) -> list[str]:
    """The README's list: every operation of Svix's server document and every operation of
    the cloud document that hookd implements, with where Svix documents it and whether hookd
    has it."""
    docs = {which: load(which) for which in ("server", "cloud")}
    rows = {}
    for which, spec in docs.items():
        for path, item in spec["paths"].items():
            for method in item:
                if method not in METHODS:
                    continue
                implemented = (method, shape(path)) in hookd_ops
                if which == "cloud" and not implemented:
                    continue
                row = rows.setdefault((path, method), {"docs": [], "hookd": implemented})
                row["docs"].append(which)
    return [
        f"| `{method.upper()} {path}` | {', '.join(r['docs'])} | {'yes' if r['hookd'] else 'no'} |"
        for (path, method), r in sorted(rows.items())
    ]


def hookd_operations(base_url: str) -> set[tuple[str, str]]:
    with urllib.request.urlopen(f"{base_url}/api/v1/openapi.json", timeout=30) as r:
        return operations(json.load(r))


def main() -> int:
    if sys.argv[1] == "readme":
        print("\n".join(operations_table(hookd_operations(sys.argv[2]))))
        return 0
    which, base_url, out_path = sys.argv[1:4]
    spec, left_out = narrowed(load(which), hookd_operations(base_url))
    changes = repair(spec, which)
    kept = sum(1 for item in spec["paths"].values() for m in item if m in METHODS)
    # Svix's documents name their cloud servers; schemathesis is given hookd's URL instead.
    spec["servers"] = [{"url": base_url}]
    Path(out_path).write_text(json.dumps(spec))
    print(
        f"svix {which} spec: {kept} operations hookd implements kept, {len(left_out)} left out",
        file=sys.stderr,
    )
    for change in changes:
        print(f"  changed: {change}", file=sys.stderr)
    for op in sorted(left_out):
        print(f"  not in hookd: {op}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
