"""Host text is inert in the command line, as in the TUI: over real sshd, a host whose tools print
terminal escapes (clear screen, OSC 52 clipboard write, an 8-bit CSI, a bidi override) in a
tool's error, which the storage probe quotes in its finding, reaches
``diag probe``, ``diag run``, ``diag report`` and ``diag query`` — text and JSON — without one
raw escape reaching the terminal; what it printed is still shown, made visible."""

from __future__ import annotations

import contextlib
import io
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from assistant.cli import main
from tests.fleet import sshfleet
from tests.fleet.fleet_hosts import HEALTHY

pytestmark = pytest.mark.ssh

HOSTILE_HOST = HEALTHY[5]
HOSTS = ",".join(HEALTHY[3:6])
# ESC[2J clears the screen, OSC 52 sets the clipboard, \x9b[2J is the 8-bit CSI form, U+202E
# reverses what follows.
ESCAPES = r"\033[2J\033]52;c;Y3VybCBldmlsLnNofHNo\007\302\2332J\342\200\256"
RAW = ("\x1b", "\x07", "\x9b", "\u202e")


def _cli(argv: list[str]) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        code = main(argv)
    return code, out.getvalue() + err.getvalue()


@pytest.fixture()
def hostile(fleet: sshfleet.SSHFleet) -> Iterator[sshfleet.SSHFleet]:
    """One host whose `mktemp` fails with escapes in its error (the storage probe quotes it)
    and whose `uname -r` prints them in the middle of its answer."""
    fleet.set_tool(HOSTILE_HOST, "mktemp", f'printf "mktemp: failed{ESCAPES}\\n" >&2; exit 1')
    fleet.set_tool(HOSTILE_HOST, "uname",
                   f'case "$1" in -r) printf "5.15.0-105-generic{ESCAPES}\\n" ;; '
                   '-n) echo "$DIAG_FLEET_HOST" ;; *) echo Linux ;; esac')
    try:
        yield fleet
    finally:
        fleet.set_tool(HOSTILE_HOST, "uname", sshfleet.DEFAULT_TOOLS["uname"])
        assert fleet.members[HOSTILE_HOST].dir is not None
        (fleet.members[HOSTILE_HOST].dir / "bin" / "mktemp").unlink()


def _strings(value: object) -> Iterator[str]:
    """Every string in a JSON value."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def _raw(output: str) -> list[str]:
    return [repr(ch) for ch in RAW if ch in output]


def test_probe_run_report_and_query_print_host_text_inert(hostile: sshfleet.SSHFleet,
                                                         tmp_path: Path) -> None:
    common = ["--inventory", str(hostile.inventory), "--hosts", HOSTS,
              "--param", "storage.path=/tmp"]
    db = str(tmp_path / "diag.duckdb")
    select = ("SELECT substr(message, strpos(message, 'mktemp')) AS m FROM findings "
              "WHERE message LIKE '%mktemp%'")
    outputs = {
        "probe": _cli(["probe", "storage", *common]),
        "probe --json": _cli(["probe", "storage", *common, "--json"]),
        "run": _cli(["run", "checkpoint-stall", *common, "--auto", "--db", db]),
        "run --json": _cli(["run", "checkpoint-stall", *common, "--auto", "--json",
                            "--db", db]),
        "report": _cli(["report", "latest", "--db", db]),
        "query": _cli(["query", "--db", db, select]),
        "query --format csv": _cli(["query", "--db", db, "--format", "csv", select]),
        "query --format json": _cli(["query", "--db", db, "--format", "json", select]),
    }
    leaks = {name: _raw(output) for name, (_, output) in outputs.items() if _raw(output)}
    assert not leaks, f"raw escapes reached the terminal: {leaks}"
    for name, (_, output) in outputs.items():
        assert any(shown in output for shown in ("␛[2J", "\\u001b[2J", "\\x1b[2J")), \
            f"{name}: the host text is not shown"
    for name in ("probe --json", "run --json", "query --format json"):
        text = outputs[name][1]
        document = json.loads(text[:text.rindex("}") + 1] if name != "query --format json"
                              else text[:text.rindex("]") + 1])
        assert any("\x1b[2J" in leaf for leaf in _strings(document)), name  # value unchanged
