"""A site's ``--criteria`` file must not reach a shell (issue 27 item 6): counter names are
interpolated into the soak's and nccl-multinode's scripts, which run on every node (and, with
``--transport local``, on the operator's machine). Names are refused at parse time unless they
are identifiers, every value must be of the kind the default is (a number where a number is
read, names where names are), and the scripts quote what they are built from anyway: a name
that reaches a builder without the file check (a runbook's ``params``) is still only text.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from probes import accept_multinode, active, soak
from probes.criteria import (
    Criteria,
    CriteriaError,
    Criterion,
    default_criteria,
    overrides_from_file,
)

HOSTILE = "symbol_error'; touch {mark}; echo '"


def _criteria_file(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "site-criteria.yaml"
    path.write_text(body)
    return path


def _names_file(tmp_path: Path, test: str, name: str) -> Path:
    return _criteria_file(tmp_path, f"""# our site
levels:
  {test}:
    counters_must_not_rise:
      value: [link_downed, "{name}"]
      source: "site policy"
""")


def test_diag_accept_refuses_a_counter_name_that_is_shell(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The attack: a soak counter named ``x'; touch ...`` ran the command on this machine."""
    from assistant.cli import main

    mark = tmp_path / "PWNED"
    criteria = _names_file(tmp_path, "soak", HOSTILE.format(mark=mark))
    code = main(["accept", "--transport", "local", "--hosts", "localhost", "--levels", "4",
                 "--duration", "1s", "--interval", "1s", "--auto", "--criteria", str(criteria)])
    err = capsys.readouterr().err
    assert not mark.exists(), "the criteria file ran a command"
    assert code == 2, err
    assert err.count("\n") == 1, err
    assert f"{criteria}:5: soak.counters_must_not_rise" in err, err
    assert "not a counter name" in err, err


@pytest.mark.parametrize("test", ["soak", "nccl-multinode"])
@pytest.mark.parametrize("name", ["a;b", "$(id)", "x y", "1abc", "-e", "a|b", "a\nb", ""])
def test_counter_names_must_be_identifiers(test: str, name: str, tmp_path: Path) -> None:
    criteria = _names_file(tmp_path, test, name.replace("\n", "\\n"))
    with pytest.raises(CriteriaError, match=rf"site-criteria.yaml:5: {test}.counters_must_not"
                                            r"_rise: .* is not a counter name"):
        overrides_from_file(criteria)


@pytest.mark.parametrize(("key", "value", "why"), [
    ("gpu-burn:\n    seconds", "['$(reboot)']", "expected a number"),
    ("gpu-burn:\n    seconds", ".inf", "finite"),
    ("ib-loopback:\n    message_bytes", ".nan", "finite"),
    ("dcgm-diag:\n    run_level", "true", "expected a number"),
    ("soak:\n    counters_must_not_rise", "7", "expected a list of counter names"),
    ("soak:\n    counters_recorded", "[tcp_retrans, 5]", "is not a counter name"),
])
def test_each_value_must_be_of_its_kind(key: str, value: str, why: str, tmp_path: Path) -> None:
    criteria = _criteria_file(tmp_path, f"levels:\n  {key}: {{value: {value}, source: s}}\n")
    with pytest.raises(CriteriaError, match=r"site-criteria.yaml:3: ") as caught:
        overrides_from_file(criteria)
    assert why in str(caught.value)


@pytest.mark.parametrize("body", ["models: {H100: 5}\n", "models: [H100]\n",
                                  "models: {H100: [H100, 3]}\n", "levels: {soak: [1]}\n"])
def test_misshapen_sections_are_one_line_not_a_crash(body: str, tmp_path: Path) -> None:
    with pytest.raises(CriteriaError, match=r"site-criteria.yaml:1: "):
        overrides_from_file(_criteria_file(tmp_path, body))


def test_good_names_and_numbers_still_load(tmp_path: Path) -> None:
    criteria = _criteria_file(tmp_path, """levels:
  soak:
    counters_must_not_rise: {value: [xid_events, port_rcv_errors, rx_icrc_encapsulated],
                             source: "site"}
  gpu-burn:
    seconds: {value: 1800, source: "site policy"}
""")
    assert set(overrides_from_file(criteria)["levels"]) == {"soak", "gpu-burn"}


def _with_names(names: list[str]) -> Criteria:
    """The defaults with hostile counter names, as if they had not come through the file check
    (a runbook's step can hand a probe any params)."""
    base = default_criteria()
    levels = {test: dict(keys) for test, keys in base.levels.items()}
    for test in ("soak", "nccl-multinode"):
        levels[test]["counters_must_not_rise"] = Criterion(names, "hostile")
    return Criteria(base.models, levels)


def _run(script: str, tmp_path: Path, path: str) -> None:
    subprocess.run(["sh", "-c", script], cwd=tmp_path, env={**os.environ, "PATH": path},
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60,
                   check=False)


def test_the_soak_script_quotes_counter_names(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    mark = tmp_path / "PWNED-soak"
    monkeypatch.setattr(active, "merged", lambda _: _with_names([HOSTILE.format(mark=mark)]))
    sysfs = tmp_path / "ib" / "mlx5_0" / "ports" / "1" / "counters"
    sysfs.mkdir(parents=True)
    (sysfs / "symbol_error").write_text("0\n")
    # the IB section alone: the rest reads this machine's kernel log and GPUs
    section = next(line for line in soak.command({"ib_sysfs": str(tmp_path / "ib")})
                   .splitlines() if "section ib'" in line)
    _run(section, tmp_path, os.environ["PATH"])
    assert not mark.exists(), "a counter name ran as a command in the soak's script"


def test_the_multinode_script_quotes_counter_names_and_the_sysfs_root(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mark, root_mark = tmp_path / "PWNED-multinode", tmp_path / "PWNED-root"
    monkeypatch.setattr(active, "merged", lambda _: _with_names([HOSTILE.format(mark=mark)]))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    srun = bin_dir / "srun"  # runs the command it launches, here, once
    srun.write_text('#!/bin/sh\nwhile [ $# -gt 0 ]; do case "$1" in -N|-w) shift 2 ;; '
                    '-*) shift ;; *) break ;; esac; done\nexec "$@"\n')
    srun.chmod(0o755)
    script = accept_multinode.command({"peers": ["n1", "n2"], "gpus_per_node": 1,
                                       "ib_sysfs": f"/nonexistent; touch {root_mark}; :"})
    _run(script, tmp_path, f"{bin_dir}:{os.environ['PATH']}")
    assert not mark.exists(), "a counter name ran as a command in nccl-multinode's script"
    assert not root_mark.exists(), "the ib_sysfs param ran as a command"
