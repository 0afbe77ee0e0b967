"""The README's list of Svix's operations is the one Svix's documents and hookd's make.

Every operation of Svix's server document, and every operation of its cloud document that
hookd's live document also has, is listed once in the README (between the
`svix-operations` markers) with the documents naming it and whether hookd has it; nothing
else is. Regenerate with `python3 tests/compat/svix_spec.py readme BASE_URL`.
"""

from __future__ import annotations

import re
from pathlib import Path

import svix_spec

README = Path(__file__).resolve().parents[2] / "README.md"


def test_the_readme_lists_every_svix_operation_as_hookd_serves_it(server):
    base_url, _ = server
    text = README.read_text(encoding="utf-8")
    block = re.search(r"<!-- svix-operations:start -->\n(.*?)<!-- svix-operations:end -->", text, re.S)
    assert block, "README has no svix-operations block"
    listed = [line for line in block.group(1).splitlines() if line.startswith("| `")]
    expected = svix_spec.operations_table(svix_spec.hookd_operations(base_url))
    missing = sorted(set(expected) - set(listed))
    extra = sorted(set(listed) - set(expected))
    assert not missing and not extra, (
        "README's Svix operations differ; regenerate with "
        "`python3 tests/compat/svix_spec.py readme BASE_URL`\n"
        + "\n".join([f"missing: {m}" for m in missing] + [f"not so: {e}" for e in extra]))
    assert len(listed) == len(set(listed)), "an operation is listed twice"
