"""Shared pieces of the store tests: the mini runbook, recorded probe data, a provider that
carries raw output like FleetProvider, a slow one to kill a walk in, and row readers."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import duckdb

from assistant.runbook import events as ev
from assistant.runbook.engine import Walk
from assistant.runbook.model import Runbook
from assistant.runbook.rehearsal import RecordedProvider
from assistant.runbook.validate import validate_text
from assistant.store import Recorder, Store
from probes.model import ProbeOutcome

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
MINI = ROOT / "tests" / "data" / "mini.yaml"
HOSTS = ["gpu001", "gpu002", "gpu003"]
ATTRS = {"gpu001": {"rack": "r01", "leaf": "leaf-01", "rail": 0, "pod": "p1"},
         "gpu002": {"rack": "r01", "leaf": "leaf-01", "rail": 1, "pod": "p1"},
         "gpu003": {"rack": "r02", "leaf": "leaf-02", "rail": 0, "pod": "p1"}}

# check-gpu (nothing) -> ask-change (yes) -> check-versions (drift) -> drift
DRIFT = {"versions": {
    "findings": [{"code": "version-drift", "hosts": ["gpu003"],
                  "evidence": {"key": "driver_version", "majority": "550.54.15",
                               "odd": {"gpu003": "535.154.05"}}}],
    "facts": {h: {"driver_version": "550.54.15", "nccl_version": "2.19.3",
                  "kernel": "5.15.0-105-generic"} for h in HOSTS}}}
DRIFT_ANSWERS = {"ask-change": "yes"}
DRIFT_PATH = ["check-gpu", "ask-change", "check-versions", "drift"]

# check-gpu (xid-drain) -> drain (action) -> hardware
XID = {"gpu": {"findings": [{"code": "xid-drain", "hosts": ["gpu002"],
                             "evidence": {"xids": [79], "count": 2}}],
               "facts": {h: {"temperature_max_c": 60} for h in HOSTS}}}


def mini_runbook() -> Runbook:
    runbook, issues = validate_text(MINI.read_text(), str(MINI), kb_ids={"xid-codes"})
    assert runbook is not None, issues
    return runbook


class RawProvider(RecordedProvider):
    """RecordedProvider that also keeps per-(probe, host) raw output, as FleetProvider does."""

    def __init__(self, recorded: Mapping[str, Mapping[str, Any]],
                 raw: Mapping[tuple[str, str], str] | None = None) -> None:
        super().__init__(recorded)
        self.outputs = dict(raw or {})
        self.raw: dict[tuple[str, str], str] = {}

    def run_probes(self, probes: Sequence[str], hosts: Sequence[str],
                   params: Mapping[str, Mapping[str, Any]],
                   emit: Callable[[ev.Event], None]) -> list[ProbeOutcome]:
        outcomes = super().run_probes(probes, hosts, params, emit)
        for probe in probes:
            for host in hosts:
                self.raw[(probe, host)] = self.outputs.get((probe, host),
                                                           f"{probe} output of {host}\n")
        return outcomes


class SlowProvider(RecordedProvider):
    """Sleeps when asked to run *slow_probe*: a walk to kill in the middle."""

    def __init__(self, recorded: Mapping[str, Mapping[str, Any]], slow_probe: str,
                 seconds: float) -> None:
        super().__init__(recorded)
        self.slow_probe, self.seconds = slow_probe, seconds

    def run_probes(self, probes: Sequence[str], hosts: Sequence[str],
                   params: Mapping[str, Mapping[str, Any]],
                   emit: Callable[[ev.Event], None]) -> list[ProbeOutcome]:
        if self.slow_probe in probes:
            time.sleep(self.seconds)
        return super().run_probes(probes, hosts, params, emit)


def record_walk(store: Store, recorded: Mapping[str, Any], answers: Mapping[str, str],
                *, listeners: Sequence[Callable[[ev.Event], None]] = (),
                provider: Any = None, symptom: str = "the job hangs",
                incident: str | None = None, simulated: bool = False) -> tuple[str, Walk]:
    """Open a session and walk the mini runbook with a Recorder; return (session id, walk)."""
    session = store.open_session("mini", HOSTS, ATTRS, incident=incident, symptom=symptom,
                                 job="12345", simulated=simulated)
    provider = provider or RawProvider(recorded)
    recorder = Recorder(store, session, raw=getattr(provider, "raw", None))
    walk = Walk(mini_runbook(), HOSTS, sweep=False, provider=provider, answers=dict(answers),
                listeners=[recorder, *listeners])
    recorder.follow(walk)
    walk.run()
    # as every front end does at a walk's end: a step the busy store refused went to the
    # journal, which this imports (a burst of writers under CI's load took one there)
    recorder.flush()
    return session, walk


def rows(store: Store, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
    return store.read(lambda con: con.execute(sql, list(params)).fetchall())


def one(store: Store, sql: str, params: Sequence[Any] = ()) -> Any:
    result = rows(store, sql, params)
    return result[0][0] if result else None


def worker(*args: str, env: Mapping[str, str] | None = None,
           **kwargs: Any) -> subprocess.Popen[str]:
    """Start tests/store/storeworker.py in a fresh interpreter."""
    return subprocess.Popen([sys.executable, "-m", "tests.store.storeworker", *args], cwd=ROOT,
                            text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kwargs)


def raw_texts(store: Store) -> dict[tuple[str, str], tuple[str, int]]:
    """(host, probe) -> (stored raw output, size before bounding) of every probe run with
    output, read back the way diag's own readers do (raw_blobs, decompressed)."""
    from assistant.store.raw import raw_outputs

    def read(con: Any) -> list[Any]:
        sessions = [r[0] for r in con.execute("SELECT id FROM sessions").fetchall()]
        return raw_outputs(con, sessions)

    return {(o.host, o.probe): (o.text, o.raw_bytes) for o in store.read(read)}


def dump_all(path: Path) -> str:
    """Every row of every table of the store file as text, compressed raw outputs inflated
    here (zlib, independently of diag's reader): what a secret scan must look through."""
    import json
    import zlib

    import duckdb

    from assistant.store.schema import TABLES

    con = duckdb.connect(str(path), read_only=True)
    try:
        tables = [con.execute(f"SELECT * FROM {table}").fetchall() for table in TABLES]
        inflated = [zlib.decompress(r[0]).decode("utf-8", "replace") for r in con.execute(
            "SELECT zlib FROM raw_blobs WHERE zlib IS NOT NULL").fetchall()]
    finally:
        con.close()
    return json.dumps([tables, inflated], default=str)


def old_store(path: Path, version: int) -> duckdb.DuckDBPyConnection:
    """A store file as a diag at schema *version* created it (open: the caller adds rows)."""
    from assistant.store.schema import MIGRATIONS

    con = duckdb.connect(str(path))
    for step in MIGRATIONS:
        if step.version <= version:
            for statement in step.statements:
                con.execute(statement)
            con.execute("INSERT INTO schema_version VALUES (?, now()::TIMESTAMP, ?)",
                        [step.version, step.description])
    return con


def export_as_written(db: Path, export: Path) -> Path:
    """The export a diag of *db*'s schema wrote of it: every table as it is, in Parquet."""
    export.mkdir(parents=True)
    with duckdb.connect(str(db), read_only=True) as con:
        for (table,) in con.execute("SELECT table_name FROM duckdb_tables()").fetchall():
            con.execute(f"COPY {table} TO '{export / table}.parquet' (FORMAT parquet)")
    return export
