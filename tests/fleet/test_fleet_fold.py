"""Folding identical results the way ``clush -b`` does (pure)."""

from __future__ import annotations

from assistant.fleet.fold import fold, format_folded, summarize
from assistant.fleet.hostexpr import expand_hosts
from assistant.fleet.transport import CommandResult


def ok(host: str, stdout: str, exit_status: int = 0, stderr: str = "") -> CommandResult:
    return CommandResult(host=host, state="ok", stdout=stdout, stderr=stderr,
                         exit_status=exit_status)


def test_fold_format_like_clush() -> None:
    results = {h: ok(h, "5.15.0-105-generic\n") for h in expand_hosts("gpu[001-031]")}
    results["gpu007"] = ok("gpu007", "5.15.0-91-generic\n")
    results["gpu032"] = CommandResult("gpu032", "unreachable", reason="connection refused")
    results["gpu033"] = CommandResult("gpu033", "unreachable", reason="connection refused")
    results["gpu034"] = ok("gpu034", "", exit_status=127, stderr="uname: not found\n")
    assert format_folded(results) == (
        "---------------\n"
        "gpu[001-006,008-031] (30)\n"
        "---------------\n"
        "5.15.0-105-generic\n"
        "---------------\n"
        "gpu007 (1)\n"
        "---------------\n"
        "5.15.0-91-generic\n"
        "---------------\n"
        "gpu034 (1) exit 127\n"
        "---------------\n"
        "uname: not found\n"
        "---------------\n"
        "gpu[032-033] (2)\n"
        "---------------\n"
        "unreachable: connection refused\n"
    )
    assert summarize(results) == "32 ok, 2 unreachable"


def test_groups_split_on_state_reason_and_exit_status() -> None:
    results = {
        "a1": ok("a1", "x\n"), "a2": ok("a2", "x\n", exit_status=1),
        "b1": CommandResult("b1", "timeout", reason="deadline"),
        "b2": CommandResult("b2", "timeout", reason="command did not finish in 5s"),
        "b3": CommandResult("b3", "timeout", reason="deadline"),
    }
    groups = fold(results)
    assert [(g.hosts, g.state) for g in groups] == [
        (["a1"], "ok"), (["a2"], "ok"), (["b1", "b3"], "timeout"), (["b2"], "timeout")]
    assert groups[2].header == "b[1,3] (2)"
    assert format_folded({}) == ""
