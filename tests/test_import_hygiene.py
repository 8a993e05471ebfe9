"""The core never imports Textual nor the TUI's heavy parts: checked in a fresh interpreter."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CORE_PACKAGES = ["probes", "assistant.runbook", "assistant.fleet", "assistant.store"]


def core_modules() -> list[str]:
    modules = []
    for package in CORE_PACKAGES:
        base = ROOT / package.replace(".", "/")
        for path in sorted(base.rglob("*.py")):
            rel = path.relative_to(ROOT).with_suffix("")
            parts = list(rel.parts)
            if parts[-1] == "__init__":
                parts.pop()
            modules.append(".".join(parts))
    return modules


@pytest.mark.parametrize("module", core_modules())
def test_core_module_does_not_import_textual(module: str) -> None:
    code = f"import sys, {module}; print('textual' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False", f"{module} pulls in textual"


def test_cli_help_does_not_import_heavy_modules() -> None:
    # `diag --help` must start fast: none of the heavy dependencies may load for it.
    code = ("import sys; from assistant import cli; cli.build_parser();"
            "print(sorted(m for m in ('textual', 'duckdb', 'paramiko', 'networkx', 'jsonschema')"
            " if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr
