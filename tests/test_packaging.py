"""The wheel a user installs: the product's data in, the test samples out."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_wheel_ships_data_but_not_test_samples(tmp_path: Path) -> None:
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w",
                    str(tmp_path), str(ROOT)], check=True, capture_output=True)
    wheel, = tmp_path.glob("diag-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert not [n for n in names if "/fixtures/real/" in n], "recorded test samples shipped"
    assert not [n for n in names if n.startswith("tests/")]
    for shipped in ("assistant/_data/runbooks/hang.yaml", "assistant/_data/kb/",
                    "assistant/_data/fixtures/scenarios/demo/scenario.yaml",
                    "probes/catalog.yaml", "probes/thresholds.yaml",
                    "assistant/runbook/runbook.schema.json", "assistant/tui/app.tcss"):
        assert any(n.startswith(shipped) for n in names), shipped
