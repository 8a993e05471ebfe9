"""Benchmark: what redaction costs, with gitleaks' ~220 rules against diag's old hand list of 20
(issue 27, item 3: "must not get more than ~2x slower").

Three loads, each measured as the best of ``--runs`` in process CPU time (a shared machine's
wall time mostly measures its load):

- ``concat``: every recorded sample of ``fixtures/real`` concatenated into one text (~350 kB),
  through ``redact_text``: the large realistic text;
- ``real``: each of those samples as a host's raw output, through ``bound_redacted`` (what the
  store does with every output: bounded to 16 kB, then redacted);
- ``scenarios``: every output of ``fixtures/scenarios`` the same way (~120 outputs);
- ``secrets``: the secret corpus (``tests/data/secret_samples.yaml``, one sample per rule)
  through ``redact_text``: texts where rules fire and replace.

``--before REV`` measures the redactor of git revision REV too, in the same process and under
the same load (its ``assistant/store/redact.py`` must stand alone, as it did before issue 27),
and prints the ratio. Not a test: run it by hand::

    .venv/bin/python bench/redact.py
    .venv/bin/python bench/redact.py --before 42335fb
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from assistant.store import redact  # noqa: E402


def loads() -> dict[str, list[str]]:
    real = [p.read_text(errors="replace") for p in sorted((ROOT / "fixtures/real").glob("*.txt"))]
    scenarios = [p.read_text(errors="replace")
                 for p in sorted((ROOT / "fixtures/scenarios").rglob("*.txt"))]
    corpus = yaml.safe_load((ROOT / "tests/data/secret_samples.yaml").read_text())
    return {"concat": ["".join(real)], "real": real, "scenarios": scenarios,
            "secrets": [entry["text"] for entry in corpus]}


def cpu_ms(work: Callable[[], object], runs: int) -> float:
    best = float("inf")
    for _ in range(runs):
        began = time.process_time()
        work()
        best = min(best, time.process_time() - began)
    return best * 1000


def measure(module: ModuleType, texts: dict[str, list[str]], runs: int) -> dict[str, float]:
    module.redact_text("warm up: HF_TOKEN=hf_0123456789abcdefghijklmnopqrstuv")
    bounded = module.bound_redacted
    return {
        "concat": cpu_ms(lambda: module.redact_text(texts["concat"][0]), runs),
        "real": cpu_ms(lambda: [bounded(t) for t in texts["real"]], runs),
        "scenarios": cpu_ms(lambda: [bounded(t) for t in texts["scenarios"]], runs),
        "secrets": cpu_ms(lambda: [module.redact_text(t) for t in texts["secrets"]], runs),
    }


def old_redactor(rev: str) -> ModuleType:
    source = subprocess.run(["git", "-C", str(ROOT), "show", f"{rev}:assistant/store/redact.py"],
                            check=True, capture_output=True, text=True).stdout
    fd, path = tempfile.mkstemp(suffix=".py", prefix="redact_before_")
    with os.fdopen(fd, "w") as handle:
        handle.write(source)
    spec = importlib.util.spec_from_file_location("redact_before", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except ImportError as exc:
        raise SystemExit(f"{rev}'s redact.py does not stand alone ({exc})") from None
    finally:
        os.unlink(path)
    return module


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--before", metavar="REV", help="also measure this revision's redactor")
    args = parser.parse_args(argv)
    texts = loads()
    sizes = {name: sum(map(len, group)) for name, group in texts.items()}
    now = measure(redact, texts, args.runs)
    before = measure(old_redactor(args.before), texts, args.runs) if args.before else None
    print(f"load average {os.getloadavg()[0]:.1f}; best of {args.runs}, CPU ms")
    for name, ms in now.items():
        line = f"{name:<10} {sizes[name] / 1024:7.0f} kB  now {ms:7.1f}"
        if before:
            line += f"  before {before[name]:7.1f}  x{ms / before[name]:.2f}"
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
