"""The command line as an operator uses it: output, exit codes, and clear errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from assistant.cli import build_parser, main
from tests.fleet.healthyfleet import NO_TEST_PROCESSES

ROOT = Path(__file__).resolve().parent.parent


def out_of(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_every_command_has_help() -> None:
    # --help on every command says what it does.
    parser = build_parser()
    subparsers = parser._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    for name, sub in subparsers.items():
        assert sub.description, f"diag {name} has no description"
        nested = [a for a in sub._actions if a.__class__.__name__ == "_SubParsersAction"]
        for action in nested:
            for child, child_parser in action.choices.items():
                assert child_parser.description, f"diag {name} {child} has no description"


def test_runbooks_list_and_show(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = out_of(["runbooks", "list"], capsys)
    assert code == 0 and len(out.splitlines()) == 10 and out.split()[0] == "acceptance"
    code, out, _ = out_of(["runbooks", "show", "hang"], capsys)
    assert code == 0 and "CONCLUSION" in out and "cause:" in out


@pytest.mark.parametrize("fmt", ["dot", "mermaid"])
def test_runbooks_graph(fmt: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = out_of(["runbooks", "graph", "low-bandwidth", "--format", fmt], capsys)
    assert code == 0
    assert out.startswith("digraph" if fmt == "dot" else "flowchart TD")
    assert out.count("->" if fmt == "dot" else "-->") >= 10


def test_run_scenario_text_report(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = out_of(["run", "hang", "--scenario", "hang-nccl-version-drift", "--auto"],
                            capsys)
    assert code == 1
    assert "conclusion: " in out and "gpu006" in out
    assert "-> version-drift" in err  # progress goes to stderr, the report to stdout


def test_run_stops_at_an_unanswered_question(capsys: pytest.CaptureFixture[str]) -> None:
    # The healthy local machine: nothing found, so the walk reaches a question and says so.
    # Other tests running beside this one start stand-in training processes (tests/probes/
    # test_logs.py's print CUDA errors): the walk looks for a process no test starts.
    _, out, _ = out_of(["run", "oom", "--transport", "local", "--auto", "--json",
                        *NO_TEST_PROCESSES], capsys)
    doc = json.loads(out)
    # "provisional": the sweep found a standing fault on this machine (with the suite's three
    # workers on two cores, a CPU that is really saturated): the walk still stops at its
    # question and says so, naming the fault as its provisional conclusion
    assert doc["status"] in ("waiting", "provisional"), doc["status"]
    assert doc["status"] == "provisional" or doc["conclusion"] is None
    assert doc["question"]["choices"]


def test_answers_up_front(capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = out_of(["run", "oom", "--transport", "local", "--auto", "--json"], capsys)
    question = json.loads(out)["question"]
    choice = question["choices"][0]["id"]
    _, out, _ = out_of(["run", "oom", "--transport", "local", "--auto", "--json", "--answer",
                        f"{question['node']}={choice}"], capsys)
    doc = json.loads(out)
    assert question["node"] in [s["node"] for s in doc["steps"]]


@pytest.mark.parametrize(("argv", "message"), [
    # each bad input names what is wrong, exit 2, no traceback
    (["run", "hangs", "--scenario", "demo"], "no runbook 'hangs'"),
    (["run", "hang", "--scenario", "no-such"], "no scenario 'no-such'"),
    (["run", "hang", "--scenario", "demo", "--answer", "nonsense"], "takes KEY=VALUE"),
    (["run", "hang", "--scenario", "demo", "--answer", "check-gpu=yes"], "is not a question"),
    (["run", "hang", "--scenario", "demo", "--param", "path=/x"], "PROBE.KEY=VALUE"),
    (["probe", "nope", "--scenario", "demo"], "no probe 'nope'"),
    (["run", "hang", "--inventory", "/nonexistent.yaml"], "nonexistent.yaml"),
    (["parse", "ibstat", "/nonexistent.txt"], "/nonexistent.txt"),
    (["parse", "no-kind", "/etc/hostname"], "unknown kind 'no-kind'"),
    (["run", "hang"], "which hosts?"),
])
def test_bad_input_is_one_clear_line(argv: list[str], message: str,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = out_of(argv, capsys)
    assert code == 2
    assert message in err and "Traceback" not in err


def test_parse_garbage_is_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    garbage = tmp_path / "garbage.txt"
    garbage.write_text("this is not ibstat output\n")
    code, _, err = out_of(["parse", "ibstat", str(garbage)], capsys)
    assert code == 2 and err.count("\n") == 1


def test_parse_json_contract(capsys: pytest.CaptureFixture[str]) -> None:
    sample = ROOT / "fixtures" / "real" / "nvidia-smi-topo__8x-h100-hbm3-nv18-8x-mlx5.txt"
    code, out, _ = out_of(["parse", "nvidia-smi-topo", str(sample), "--json"], capsys)
    facts = json.loads(out)
    assert code == 0 and len(facts["gpus"]) == 8 and facts["links"]["GPU0"]["GPU1"] == "NV18"


def test_probe_json_has_every_host(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = out_of(["probe", "network", "--scenario", "hang-ib-port-down", "--json"],
                          capsys)
    doc = json.loads(out)
    assert len(doc["hosts"]) == 8 and all(h["state"] == "ok" for h in doc["hosts"].values())
    assert "ib-port-down" in {f["code"] for f in doc["findings"]}
    assert code == 1


def test_version_baseline_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pinned = tmp_path / "baseline.yaml"
    pinned.write_text("driver_version: 550.54.15\n")
    _, out, _ = out_of(["probe", "versions", "--scenario", "demo", "--baseline", str(pinned),
                        "--json"], capsys)
    codes = {f["code"] for f in json.loads(out)["findings"]}
    assert "version-baseline-mismatch" in codes
    pinned.write_text("drivr: 1\n")
    code, _, err = out_of(["probe", "versions", "--scenario", "demo", "--baseline",
                           str(pinned)], capsys)
    assert code == 2 and "unknown key(s) drivr" in err


def test_console_script_starts_without_a_traceback() -> None:
    result = subprocess.run([sys.executable, "-m", "assistant.cli", "--version"],
                            capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0 and result.stdout.startswith("diag ")


def test_command_groups_name_every_command() -> None:
    """`diag CMD` registers only CMD's group: the map must know every command and its group
    must really add it (else the parse of `diag CMD` would refuse CMD)."""
    from assistant.cli import COMMAND_GROUPS

    choices = build_parser()._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    assert set(COMMAND_GROUPS) == set(choices)
    for command in COMMAND_GROUPS:
        one = build_parser(command)._subparsers._group_actions[0].choices  # type: ignore[union-attr]
        assert command in one


@pytest.mark.parametrize("argv", [["match", "nccl", "timeout"], ["match", "训练卡住"],
                                  ["runbooks", "list"]])
def test_fast_args_are_what_argparse_builds(argv: list[str]) -> None:
    """`diag match WORDS` and `diag runbooks list` skip argparse: the namespace must be the
    one argparse builds for the same line (a new top-level option breaks this until
    _top_defaults knows it)."""
    from assistant.cli import fast_args

    assert vars(fast_args(argv)) == vars(build_parser(argv[0]).parse_args(argv))


@pytest.mark.parametrize("argv", [["match", "--json", "x"], ["match", "-"], ["match"],
                                  ["match", "x", "--help"], ["runbooks", "list", "--json"],
                                  ["runbooks"], ["runbooks", "show", "hang"], ["--help"], []])
def test_anything_else_goes_to_argparse(argv: list[str]) -> None:
    from assistant.cli import fast_args

    assert fast_args(argv) is None
