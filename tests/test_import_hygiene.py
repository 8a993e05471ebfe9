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


def _pulls_in_textual(modules: list[str]) -> bool:
    code = f"import sys, {', '.join(modules)}; print('textual' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip() != "False"


def test_core_modules_do_not_import_textual() -> None:
    # Every core module in one fresh interpreter (141 interpreters cost ~25 s of CPU); only when
    # that one pulls Textual in are the modules tried one by one, to name the culprits.
    modules = core_modules()
    assert len(modules) > 50  # the walk over the packages found them
    if _pulls_in_textual(modules):
        culprits = [m for m in modules if _pulls_in_textual([m])]
        pytest.fail(f"these core modules pull in textual: {', '.join(culprits)}")


def test_cli_help_does_not_import_heavy_modules() -> None:
    # `diag --help` must start fast: none of the heavy dependencies may load for it.
    code = ("import sys; from assistant import cli; cli.build_parser();"
            "print(sorted(m for m in ('textual', 'duckdb', 'paramiko', 'networkx', 'jsonschema')"
            " if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr
