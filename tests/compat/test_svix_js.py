"""Svix's official JavaScript SDK against the live hookd: the 2.x line and the last 1.x, each
through the checks in js/sdk.mjs (deliveries verified by the SDK's Webhook and by
standardwebhooks, implicit applications, deliverAt, send-example, filters, expunge, paging back,
portal tokens). The packages are pinned in js/package.json; scripts/test installs them."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

JS = Path(__file__).resolve().parent / "js"


@pytest.mark.parametrize("module", ["svix", "svix1"], ids=["svix-js-2.x", "svix-js-1.x"])
def test_the_javascript_sdk_works_unchanged(server, module):
    node = shutil.which("node")
    assert node, "node is not installed: the JavaScript SDK suite cannot run"
    assert (JS / "node_modules" / module).is_dir(), (
        f"the JavaScript SDK is not installed: run `npm ci` in {JS} (scripts/test does)"
    )
    base_url, api_key = server
    run = subprocess.run(
        [node, "sdk.mjs", module, base_url, api_key],
        cwd=JS, capture_output=True, text=True, timeout=120,
    )
    print(run.stdout)
    assert run.returncode == 0, f"{module}:\n{run.stdout}\n{run.stderr}"
