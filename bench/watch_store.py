"""Benchmark: what one round of ``diag watch`` (or an acceptance soak) costs the store.

A watch of ``--hosts`` nodes, each with ``--hcas`` HCAs reading the soak's 8 IB error counters
per port plus its GPU counters and TCP retransmits (which rise every round on a healthy host,
the rest stays), is recorded round after round by the ``Recorder`` into a fresh DuckDB file,
as ``diag watch`` records it. Printed per round, after the first ``--warm`` rounds (the file's
fixed overhead): the JSON of the counters written (``samples.counters``), the bytes the process
wrote to files (``wchar`` of /proc/self/io: the WAL, then DuckDB's checkpoint at each short
connection's close) and the growth of the file on disk (store and WAL), over ``--rounds``
rounds.

``--every-counter`` records every counter of every host each round, as diag did before a round
stored only what changed (issue 27 item 7): the figure to compare with.

Not a test: run it by hand::

    .venv/bin/python bench/watch_store.py                  # 8 hosts x 8 HCAs, 300 rounds
    .venv/bin/python bench/watch_store.py --every-counter
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import duckdb  # noqa: E402

from assistant.runbook import events as ev  # noqa: E402
from assistant.store import Recorder, Store  # noqa: E402

IB = ("symbol_error", "link_downed", "link_error_recovery", "port_rcv_errors",
      "local_link_integrity_errors", "out_of_sequence", "packet_seq_err", "local_ack_timeout_err")


def counters(hcas: int, seq: int) -> dict[str, Any]:
    out: dict[str, Any] = {f"mlx5_{h}/1 {name}": 0 for h in range(hcas) for name in IB}
    out.update(xid_events=0, ecc_uncorrected=0, remapped_rows_pending=0,
               ecc_corrected_volatile=4, tcp_retrans=123_456 + 7 * seq)
    return out


def every_counter(probe: str, samples: Mapping[str, Mapping[str, Any]],
                  ) -> dict[str, dict[str, Any]]:
    """The Recorder's ``_changed`` as it was: every sample as taken."""
    return {host: dict(sample) for host, sample in samples.items()}


def written() -> int:
    """Bytes this process has written with write(2) and the like so far (Linux)."""
    with open("/proc/self/io") as io:
        return next(int(line.split()[1]) for line in io if line.startswith("wchar:"))


def on_disk(path: Path) -> int:
    return sum(os.path.getsize(p) for p in (path, Path(f"{path}.wal")) if p.exists())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, default=8)
    parser.add_argument("--hcas", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--warm", type=int, default=10)
    parser.add_argument("--every-counter", action="store_true",
                        help="store every counter each round (diag before issue 27 item 7)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "diag.duckdb"
        store = Store(path)
        hosts = [f"gpu{i:03d}" for i in range(1, args.hosts + 1)]
        session = store.open_session("watch", hosts, {}, symptom="bench")
        recorder = Recorder(store, session)
        if args.every_counter:
            recorder._changed = every_counter  # type: ignore[method-assign]
        warm = wrote = 0
        for seq in range(args.rounds):
            now = 1_700_000_000.0 + 60 * seq
            recorder(ev.SampleTaken("soak", seq, now, {
                host: {"seq": seq, "ts": now, "state": "ok", "reason": "",
                       "counters": counters(args.hcas, seq), "missing": [], "xid_lines": []}
                for host in hosts}))
            if seq + 1 == args.warm:
                warm, wrote = on_disk(path), written()
        grown, wrote = on_disk(path) - warm, written() - wrote
        with duckdb.connect(str(path), read_only=True) as con:
            row = con.execute("SELECT sum(strlen(counters::VARCHAR)) FROM samples "
                              "WHERE seq >= ?", [args.warm]).fetchone()
        json_bytes = row[0] if row else 0
    later = args.rounds - args.warm
    print(f"{args.hosts} hosts x {args.hcas} HCAs, {later} rounds after {args.warm}"
          f"{' (every counter stored)' if args.every_counter else ''}: "
          f"{json_bytes / later:,.0f} B of counters JSON, {wrote / later:,.0f} B written to "
          f"files, {grown / later:,.0f} B more on disk per round")


if __name__ == "__main__":
    main()
