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


# CONTRIBUTING.md: "no module of assistant/ or probes/ grows past ~400 lines: split it by job
# before it does". Generated or data files are not Python modules and are not counted.
MAX_MODULE_LINES = 400


def test_no_module_grows_past_the_house_limit() -> None:
    too_long = {str(path.relative_to(ROOT)): lines
                for package in ("assistant", "probes")
                for path in sorted((ROOT / package).rglob("*.py"))
                if (lines := len(path.read_text(encoding="utf-8").splitlines()))
                > MAX_MODULE_LINES}
    assert not too_long, f"split these by job (CONTRIBUTING.md): {too_long}"


def test_the_tui_writes_no_sql_of_its_own() -> None:
    """The TUI reads the history through the store's functions (store/views.py and the
    others): a front end with its own SQL against the schema drifts from it unseen."""
    import re

    sql = re.compile(r"\b(SELECT|UPDATE|INSERT|DELETE)\s+\S")
    tui = sorted((ROOT / "assistant" / "tui").rglob("*.py"))
    found = [str(path.relative_to(ROOT)) for path in tui
             if any(sql.search(line) and ('"' in line or "'" in line)
                    for line in path.read_text(encoding="utf-8").splitlines()
                    if not line.lstrip().startswith("#"))]
    assert not found, found
