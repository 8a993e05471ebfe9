"""Every YAML file a user writes goes through one loader (``assistant.yamlfile``): a duplicate
key is refused with its line in each kind of file, never silently "last one wins"."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pytest

from assistant.cli import main

DUPLICATE = {
    # kind: (file name, text with a duplicate key on line 3, the command that reads it)
    "thresholds": ("t.yaml", "# mine\nxid_window_minutes: 60\nxid_window_minutes: 90\n",
                   ["probe", "versions", "--scenario", "demo", "--thresholds", "{path}"]),
    "baseline": ("b.yaml", "# pinned\ndriver_version: 550.54.15\ndriver_version: 1\n",
                 ["probe", "versions", "--scenario", "demo", "--baseline", "{path}"]),
    "inventory": ("i.yaml", "hosts:\n  gpu001: {}\n  gpu001: {}\n",
                  ["probe", "versions", "--inventory", "{path}"]),
    "runbook": ("r.yaml", "id: r\ntitle: x\ntitle: y\n", ["runbooks", "validate", "{path}"]),
}


def run(argv: list[str]) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(argv)
    return code, err.getvalue()


@pytest.mark.parametrize("kind", sorted(DUPLICATE))
def test_a_duplicate_key_is_refused_with_its_line(kind: str, tmp_path: Path) -> None:
    name, text, argv = DUPLICATE[kind]
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    code, err = run([a.replace("{path}", str(path)) for a in argv])
    assert code == 2, err
    assert "duplicate key" in err and f"{path}:3" in err, err
    assert "Traceback" not in err


def test_thresholds_errors_name_the_line(tmp_path: Path) -> None:
    path = tmp_path / "t.yaml"
    path.write_text("xid_window_minutes: 60\nno_such_threshold: 1\n", encoding="utf-8")
    code, err = run(["probe", "versions", "--scenario", "demo", "--thresholds", str(path)])
    assert code == 2 and f"{path}:2: unknown threshold 'no_such_threshold'" in err


def test_a_param_value_that_is_not_yaml_is_one_line() -> None:
    code, err = run(["probe", "storage", "--scenario", "demo", "--param", "storage.path=[x"])
    assert code == 2 and "--param storage.path" in err and err.count("\n") == 1, err


@pytest.mark.parametrize("value", [".nan", ".inf", "-.inf", "{H100: {warn: .nan, fail: 350}}"])
def test_a_threshold_that_is_not_a_finite_number_is_refused(value: str, tmp_path: Path) -> None:
    """``.nan`` compares false with everything: the check it configures passed every host."""
    path = tmp_path / "t.yaml"
    key = "busbw_multi_node_gb_s" if value.startswith("{") else "gpu_temperature_max_c"
    path.write_text(f"# site\n{key}: {value}\n", encoding="utf-8")
    code, err = run(["probe", "gpu", "--scenario", "demo", "--thresholds", str(path)])
    assert code == 2 and f"{path}:2: '{key}' is" in err and "finite number" in err, err
    assert err.count("\n") == 1


def test_misspelt_keys_name_the_nearest_known_one(tmp_path: Path) -> None:
    thresholds = tmp_path / "t.yaml"
    thresholds.write_text("gpu_temperature_max: 80\n", encoding="utf-8")
    code, err = run(["probe", "gpu", "--scenario", "demo", "--thresholds", str(thresholds)])
    assert code == 2 and "(did you mean 'gpu_temperature_max_c'" in err, err
    scenario = tmp_path / "s" / "scenario.yaml"
    scenario.parent.mkdir()
    scenario.write_text("titel: x\nsymptom: y\nrunbook: hang\nhosts: gpu1\n", encoding="utf-8")
    code, err = run(["probe", "versions", "--scenario", str(scenario)])
    assert code == 2 and "unknown key 'titel' (did you mean 'title'? allowed: " in err, err
