"""A command the sweep had to end is read by what its processes were doing (probes/hangstate.py).

A time-out alone does not tell a wedged driver (nvidia-smi blocked in the kernel, state D) from
a command that is only slow on a host whose CPUs are saturated. The sweep prints ps's view of a
component's processes before it ends them; a blocked one keeps the catalog's hang verdict, a
merely slow one on a saturated host makes the host "not measured", never accused.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from assistant.cli import main
from probes import hangstate, sweep

BASELINE = Path(__file__).resolve().parents[1] / "fixtures" / "scenarios" / "_baseline"
SATURATED_HOST = (Path(__file__).resolve().parents[1] / "fixtures" / "scenarios"
                  / "hang-healthy-slow-smi-busy-host" / "outputs" / "host-gpu005-saturated.txt")


# --- on the host: what the sweep prints for a component it ends ---------------------------

def test_the_sweep_prints_the_state_of_every_process_of_a_component_it_ends() -> None:
    # Real processes: a shell spinning on a CPU (R) and one waiting on a child that sleeps (S).
    script = sweep.script([("spin", "while :; do :; done"), ("nap", "sleep 30 ; echo never"),
                           ("quick", "echo done")], 2)
    done = subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=30)
    parts = sweep.split(done.stdout)
    assert parts["quick"] == sweep.Part("done\n", 0)
    spin = hangstate.processes(parts["spin"].stuck)
    assert parts["spin"].timed_out and [p.state[:1] for p in spin] == ["R"]
    assert spin[0].elapsed_s >= 1  # it ran the whole limit
    nap = {p.command: p.state[:1] for p in hangstate.processes(parts["nap"].stuck)}
    assert nap == {"sh": "S", "sleep": "S"}
    # the states come after the component's own output, which they do not change
    assert "diag:probe-stuck" not in parts["nap"].text


def test_compose_and_split_carry_the_process_states() -> None:
    rows = ("4711 S 25 do_wait sh", "4712 D 25 - nvidia-smi")
    parts = [("gpu", sweep.Part("=== diag:section query\n", None, True, rows)),
             ("host", sweep.Part("x\n", 0))]
    back = sweep.split(sweep.compose(parts))
    assert back["gpu"].stuck == rows and back["gpu"].timed_out
    assert back["host"] == sweep.Part("x\n", 0)


@pytest.mark.parametrize(("rows", "saturated", "verdict", "named"), [
    (["4711 S 25 do_wait sh", "4712 D 25 - nvidia-smi"], True, "blocked", ["nvidia-smi"]),
    (["4712 D+ 25 nv_wait_x nvidia-smi"], False, "blocked", ["nvidia-smi"]),
    (["4711 S 25 do_wait sh", "4712 R 25 - nvidia-smi"], True, "starved", ["nvidia-smi"]),
    # asleep: waiting for something a busy CPU does not explain (a device, a timer)
    (["4711 S 25 do_wait sh", "4712 S 25 - nvidia-smi"], True, "unknown", []),
    ([], True, "starved", []),
    (["4711 S 25 do_wait sh", "4712 R 25 - nvidia-smi"], False, "unknown", []),
    ([], False, "unknown", []),
    (["garbage", "12 S"], True, "starved", []),
])
def test_the_verdict_needs_a_blocked_process_or_a_saturated_host(
        rows: list[str], saturated: bool, verdict: str, named: list[str]) -> None:
    got, shown = hangstate.judge(rows, ("D",), saturated)
    assert (got, [p.command for p in shown]) == (verdict, named)


def test_a_process_row_with_spaces_in_its_command_is_read_whole() -> None:
    (process,) = hangstate.processes(["88 D 25 nfs_wait_bit_killable cp -a /ckpt"])
    assert (process.pid, process.state, process.elapsed_s, process.wchan, process.command) == (
        88, "D", 25, "nfs_wait_bit_killable", "cp -a /ckpt")
    assert process.words() == "cp -a /ckpt (pid 88, state D in nfs_wait_bit_killable, 25 s)"


@pytest.mark.parametrize(("elapsed", "verdict"), [(3, "late"), (13, "late"), (14, "unknown"),
                                                  (30, "unknown")])
def test_a_command_the_host_ran_for_under_half_of_diags_limit_is_diags_delay(
        elapsed: int, verdict: str) -> None:
    # diag's time-out (30 s) counts on diag's side: a command that had run on the host for
    # under half of it when diag gave up never had its time there (ps's whole seconds are cut
    # down: 14 may be 14.9, so 13 is the last that is surely under 15).
    rows = [f"900 S {elapsed} do_wait sh", f"901 S {elapsed} - nvidia-smi"]
    assert hangstate.judge(rows, ("D",), False, given_s=30)[0] == verdict
    # blocked in the kernel is a hang however late it started
    assert hangstate.judge([f"901 D {elapsed} - nvidia-smi"], ("D",), False, 30)[0] == "blocked"


# --- a walk: fault and twin ---------------------------------------------------------------

def _walk(tmp_path: Path, capsys: pytest.CaptureFixture[str], saturated: bool,
          processes: list[str] | None) -> dict[str, Any]:
    """gpu003's nvidia-smi (the gpu component, section query) did not finish in the sweep."""
    host = SATURATED_HOST if saturated else BASELINE / "host.txt"
    (tmp_path / "host.txt").write_text(host.read_text())
    state = {"state": "timeout", "phase": "command", "probes": ["gpu"],
             "reason": "command did not finish in 25s"}
    if processes is not None:
        state["processes"] = {"gpu": processes}
    (tmp_path / "scenario.yaml").write_text(
        "title: t\nsymptom: s\nrunbook: hang\nhosts: gpu[001-004]\n"
        f"states:\n  gpu003: {json.dumps(state)}\n"
        "outputs:\n  gpu:\n    gpu003: \"=== diag:section query\\n\"\n"
        "  host:\n    gpu003: host.txt\n")
    main(["run", "hang", "--scenario", str(tmp_path), "--auto", "--json"])
    return dict(json.loads(capsys.readouterr().out))


def _on(doc: dict[str, Any], code: str) -> set[str]:
    return {h for f in doc["findings"] if f["code"] == code for h in f["hosts"]}


@pytest.mark.parametrize(("saturated", "processes"), [
    (True, ["3318840 S 25 do_wait sh", "3318852 D 25 - nvidia-smi"]),  # wedged; CPUs busy
    (False, ["3318840 S 25 do_wait sh", "3318852 S 25 - nvidia-smi"]),  # stuck, quiet host
    (False, None),  # no process states: a hang, as before the sweep printed them
])
def test_a_wedged_driver_is_still_named(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                        saturated: bool, processes: list[str] | None) -> None:
    doc = _walk(tmp_path, capsys, saturated, processes)
    assert doc["conclusion"]["id"] == "gpu-driver-hung"
    assert doc["conclusion"]["hosts"] == ["gpu003"] and _on(doc, "gpu-driver-hung") == {"gpu003"}


@pytest.mark.parametrize("processes", [
    ["2291901 S 25 do_wait sh", "2291917 R 25 - nvidia-smi"],
    None,  # ps printed nothing on a saturated host: slow and stuck cannot be told apart
])
def test_a_slow_command_on_a_saturated_host_accuses_nobody(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], processes: list[str] | None) -> None:
    doc = _walk(tmp_path, capsys, True, processes)
    assert _on(doc, "gpu-driver-hung") == set() and _on(doc, "probe-hung") == set()
    assert "gpu003" in _on(doc, "cpu-saturated")
    slow = [f for f in doc["findings"] if f["code"] == "not-measured" and "gpu003" in f["hosts"]
            and "slow, not stuck" in f["message"]]
    assert slow, [f["message"] for f in doc["findings"] if "gpu003" in f["hosts"]]
    conclusion = doc["conclusion"] or {}
    assert conclusion.get("id") != "gpu-driver-hung" and not conclusion.get("hosts")
    assert doc["faults"] == []


@pytest.mark.parametrize(("rows", "given", "verdict"), [
    # an operator's --deadline 3 left a two-sample component 2 s of its usual 25: asleep
    # between its samples, it had not hung
    (["4711 S 2 do_wait sh", "4712 S 2 hrtimer_nanosleep sleep"], 2.0, "short"),
    (["4712 D 2 - nvidia-smi"], 2.0, "blocked"),  # blocked in the kernel whatever the limit
    (["4711 S 25 do_wait sh", "4712 S 25 - nvidia-smi"], 25.0, "unknown"),  # its full time
])
def test_a_limit_the_operator_cut_below_the_probes_own_is_diags_side(
        rows: list[str], given: float, verdict: str) -> None:
    got, _ = hangstate.judge(rows, ("D",), False, given, 25.0)
    assert got == verdict
    if verdict == "short":
        assert got in hangstate.NOT_MEASURED
        assert "--deadline" in hangstate.explain(got, hangstate.processes(rows), "h1", given)
