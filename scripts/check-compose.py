#!/usr/bin/env python3
"""Checks docker-compose.yml without a Docker engine: it parses, every service has an image or
build, every dependency names a service, and every HOOKD_* variable is a real hookd setting."""
import re
import sys
from pathlib import Path

import yaml

root = Path(__file__).resolve().parent.parent
compose_path = Path(sys.argv[1] if len(sys.argv) > 1 else root / "docker-compose.yml")
doc = yaml.safe_load(compose_path.read_text())
# The settings are declared once, in the `settings! { name: Type = "default", … }` list.
declared = root / "crates/hookd/src/config/mod.rs"
block = declared.read_text().split("\nsettings! {", 1)[-1].split("\n}\n", 1)[0]
settings = {"HOOKD_" + n.upper() for n in re.findall(r'^    (\w+): [^=]+= "', block, re.M)}
if len(settings) < 10:
    sys.exit(f"found {len(settings)} settings in {declared}'s settings! list")

errors = []
services = doc.get("services") or {}
if not services:
    errors.append("no services")
for name, svc in services.items():
    if "image" not in svc and "build" not in svc:
        errors.append(f"{name}: neither image nor build")
    deps = svc.get("depends_on") or {}
    for dep in deps if isinstance(deps, (list, dict)) else []:
        if dep not in services:
            errors.append(f"{name}: depends_on unknown service {dep!r}")
    env = svc.get("environment") or {}
    keys = env.keys() if isinstance(env, dict) else [e.split("=", 1)[0] for e in env]
    for key in keys:
        if key.startswith("HOOKD_") and key not in settings:
            errors.append(f"{name}: {key} is not a hookd setting (known: {', '.join(sorted(settings))})")
if errors:
    print("\n".join(f"docker-compose.yml: {e}" for e in errors), file=sys.stderr)
    sys.exit(1)
print(f"{compose_path.name}: {len(services)} services OK ({', '.join(services)})")
