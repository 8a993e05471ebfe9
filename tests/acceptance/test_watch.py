"""``diag watch`` over 8 loopback sshd nodes for a minute at a 10 s interval: every round is
recorded, and the one node whose kernel log gains XID lines (a real recording, one more line
each round) is named with the counter that rose; the seven others show nothing rising.

The issue's own check ran it for 2 minutes (``DIAG_WATCH_SECONDS=120``); a minute gives six
rounds, enough for the counter to reach the recording's three lines, and keeps the suite's
longest test from holding a worker for two minutes of sleep."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

from tests.acceptance import standins
from tests.fleet import sshfleet

pytestmark = pytest.mark.ssh

NODES = [f"w{i:03d}" for i in range(1, 9)]
RISING = "w005"
XID = standins.REAL / "dmesg-xid__xid48-63-94-dbe-row-remap-contained.txt"


def _growing_dmesg(counter: Path) -> str:
    """A dmesg that prints one more line of a real XID recording at each call (the count is
    kept in *counter*, a file the test user may write)."""
    lines = XID.read_text()
    return "\n".join([
        f"c={shlex.quote(str(counter))}; n=$(cat \"$c\" 2>/dev/null || echo 0); "
        "echo $((n + 1)) > \"$c\"",
        f"printf '%s' {shlex.quote(lines)} | head -n \"$n\"",
    ])


@pytest.fixture(scope="module")
def fleet() -> Iterator[sshfleet.SSHFleet]:
    reason = sshfleet.unavailable_reason()
    if reason:
        sshfleet.skip_or_fail(reason)
    state = Path(tempfile.mkdtemp(prefix="diag-watch-"))  # the fleet's user writes in it
    state.chmod(0o777)
    counter = state / "xid-count"
    tools = {n: {"nvidia-smi": standins.nvidia_smi(), "dmesg": "exit 0"} for n in NODES}
    tools[RISING]["dmesg"] = _growing_dmesg(counter)
    try:
        with sshfleet.SSHFleet(NODES, tools=tools) as started:
            yield started
    finally:
        shutil.rmtree(state, ignore_errors=True)


def test_watch_records_every_round_and_names_the_counter_that_rose(
        fleet: sshfleet.SSHFleet, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from assistant.cli import main

    db = tmp_path / "diag.duckdb"
    # 120: the 2 minutes; 40 in CI (four rounds still show the recording's three
    # rises, one a round after the first call)
    seconds = int(os.environ.get("DIAG_WATCH_SECONDS", "40"))
    code = main(["watch", "--inventory", str(fleet.inventory), "--hosts", "w[001-008]",
                 "--duration", f"{seconds}s", "--interval", "10s",
                 "--param", "soak.rdma=false", "--db", str(db), "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 1, doc
    rounds = seconds // 10  # at 0, 10, 20, 30 s: the next would end after the duration
    assert {h: row["samples"] for h, row in doc["hosts"].items()} == dict.fromkeys(NODES, rounds)
    # 0 lines at the first call, one more each round, up to the recording's 3
    rise = min(3, rounds - 1)
    assert doc["hosts"][RISING]["rose"] == {"xid_events": rise}
    assert all(not row["rose"] for h, row in doc["hosts"].items() if h != RISING)
    # this machine's real TCP retransmits may rise: shown, never a failure by themselves
    assert all(set(row["recorded"]) <= {"tcp_retrans", "ecc_corrected_volatile"}
               for row in doc["hosts"].values())
    xid = [f for f in doc["findings"] if f["code"] == "soak-xid"]
    assert [f["hosts"] for f in xid] == [[RISING]]
    assert "Xid" in xid[0]["message"]
    with duckdb.connect(str(db), read_only=True) as con:
        per_host = dict(con.execute("SELECT host, count(*) FROM samples WHERE probe = 'soak' "
                                    "GROUP BY host").fetchall())
        rose = con.execute("SELECT host, metric, value FROM acceptance WHERE verdict = 'fail'"
                           ).fetchall()
    assert per_host == dict.fromkeys(NODES, rounds)
    assert rose == [(RISING, "xid_events", float(rise))]


@pytest.mark.parametrize("argv", [["--duration", "soon"], ["--duration", "10s", "--interval",
                                                                "1m"], ["--duration=-5m"]])
def test_bad_durations_are_one_line(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    from assistant.cli import main

    assert main(["watch", "--hosts", "gpu001", *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--" in err
