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
    spin, _ = hangstate.looks(parts["spin"].stuck)
    assert parts["spin"].timed_out and [p.state[:1] for p in spin] == ["R"]
    assert spin[0].elapsed_s >= 1  # it ran the whole limit
    nap = {p.command: p.state[:1] for p in hangstate.looks(parts["nap"].stuck)[0]}
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


AGAIN = hangstate.AGAIN


@pytest.mark.parametrize(("rows", "verdict", "named"), [
    # a wedged driver: the same nvidia-smi blocked at both looks, a second apart
    (["4711 S 25 do_wait sh", "4712 D 25 nv_wait nvidia-smi", AGAIN,
      "4711 S 26 do_wait sh", "4712 D 26 nv_wait nvidia-smi"], "blocked", ["nvidia-smi"]),
    # a disk read or a page-in on a loaded host: blocked at the first look only
    (["4711 S 25 do_wait sh", "4712 D 25 io_schedule nvidia-smi", AGAIN,
      "4711 S 26 do_wait sh", "4712 R 26 - nvidia-smi"], "moving", ["nvidia-smi"]),
    (["4712 D 25 folio_wait_bit cat", AGAIN], "moving", ["cat"]),
    # blocked at the second look only: not yet seen to stay there
    (["4711 S 25 do_wait sh", "4712 S 25 - cat", AGAIN,
      "4711 S 26 do_wait sh", "4713 D 0 io_schedule cat"], "moving", ["cat"]),
    # a new process between the looks: the command goes on (reading the next GPU)
    (["4711 S 25 do_wait sh", "4712 S 25 - nvidia-smi", AGAIN,
      "4711 S 26 do_wait sh", "4714 S 0 - nvidia-smi"], "moving", ["nvidia-smi"]),
    # asleep at both looks, nothing new: what one look said (a hang on a quiet host)
    (["4711 S 25 do_wait sh", "4712 S 25 - nvidia-smi", AGAIN,
      "4711 S 26 do_wait sh", "4712 S 26 - nvidia-smi"], "unknown", []),
    # a process gone at the second look proves nothing (diag's remote limit may have ended it)
    (["4711 S 25 do_wait sh", "4712 S 25 - nvidia-smi", AGAIN, "4711 S 26 do_wait sh"],
     "unknown", []),
    # no ps on the host: nothing at either look
    ([AGAIN], "unknown", []),
])
def test_blocked_means_blocked_at_both_looks(rows: list[str], verdict: str,
                                             named: list[str]) -> None:
    got, shown = hangstate.judge(rows, ("D",), False)
    assert (got, [p.command for p in shown]) == (verdict, named)
    assert (got in hangstate.NOT_MEASURED) == (verdict == "moving")


def test_the_sweep_looks_twice_before_it_ends_a_component() -> None:
    # Real processes: one component spinning (R) and one asleep; both timed out, looked at
    # twice (a second apart, once for every component) and only then ended.
    script = sweep.script([("spin", "while :; do :; done"), ("nap", "sleep 30")], 1)
    done = subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=30)
    parts = sweep.split(done.stdout)
    for name in ("spin", "nap"):
        first, second = hangstate.looks(parts[name].stuck)
        assert first and second is not None, parts[name]
        assert {p.pid for p in first} == {p.pid for p in second}
        assert max(p.elapsed_s for p in second) >= max(p.elapsed_s for p in first)
    assert hangstate.judge(parts["nap"].stuck, ("D",), False)[0] == "unknown"


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
    # wedged, at both looks a second apart
    (False, ["3318840 S 25 do_wait sh", "3318852 D 25 - nvidia-smi", hangstate.AGAIN,
             "3318840 S 26 do_wait sh", "3318852 D 26 - nvidia-smi"]),
    (False, ["3318840 S 25 do_wait sh", "3318852 S 25 - nvidia-smi"]),  # stuck, quiet host
    (False, None),  # no process states: a hang, as before the sweep printed them
])
def test_a_wedged_driver_is_still_named(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                        saturated: bool, processes: list[str] | None) -> None:
    doc = _walk(tmp_path, capsys, saturated, processes)
    assert doc["conclusion"]["id"] == "gpu-driver-hung"
    assert doc["conclusion"]["hosts"] == ["gpu003"] and _on(doc, "gpu-driver-hung") == {"gpu003"}


def test_a_command_blocked_at_one_look_only_accuses_nobody(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # nvidia-smi in D when the limit came (paging in, a disk read) and running a second later,
    # on a host whose CPUs are not saturated: moving, not stuck, so not measured
    doc = _walk(tmp_path, capsys, False, [
        "3318840 S 25 do_wait sh", "3318852 D 25 folio_wait_bit_common nvidia-smi",
        hangstate.AGAIN, "3318840 S 26 do_wait sh", "3318852 R 26 - nvidia-smi"])
    assert _on(doc, "gpu-driver-hung") == set() and _on(doc, "probe-hung") == set()
    slow = [f for f in doc["findings"] if f["code"] == "not-measured" and "gpu003" in f["hosts"]
            and "slow, not stuck" in f["message"]]
    assert slow, [f["message"] for f in doc["findings"] if "gpu003" in f["hosts"]]
    assert not (doc["conclusion"] or {}).get("hosts") and doc["faults"] == []


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
