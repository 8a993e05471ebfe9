"""What is written, as functions over an open connection inside one transaction.

``Store`` opens the connection and the transaction; these functions only say what rows a
session, a step, an undo or a conclusion becomes. Keeping them free of connection handling
lets one step — its row, its probe runs, its findings, its action and the walk state to resume
from — be exactly one transaction: after a ``kill -9`` either all of it is there or none.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import timezone
from pathlib import Path
from typing import Any

from . import hostincidents
from .base import Connection, fetch_rows, insert_rows, new_id, now_utc, resolve_id, utc
from .evidence_rows import host_rows
from .prepared import PreparedRun, split_step, to_json
from .raw import add_blobs
from .redact import redact_data, redact_text

PLACEMENT_KEYS = ("rack", "leaf", "rail")
# Walk status -> session status ('ready' means the walk is between steps: running).
_SESSION_STATUS = {"ready": "running", "waiting": "waiting", "concluded": "concluded"}


_json = to_json


def _title(symptom: str, runbook: str, hosts: Sequence[str]) -> str:
    first = next((line.strip() for line in symptom.splitlines() if line.strip()), "")
    if first:
        return first if len(first) <= 100 else first[:99] + "…"
    from probes.hostfold import fold_counted

    return f"{runbook} on {fold_counted(hosts)}"


def _str_or_none(value: Any) -> str | None:
    return None if value is None or value == "" else str(value)


# --- sessions and incidents ----------------------------------------------------------------

def insert_session(con: Connection, *, runbook: str, hosts: list[str],
                   attrs: Mapping[str, Mapping[str, Any]], incident: str | None,
                   symptom: str, job: str | None, title: str | None, tags: list[str],
                   operator: str, target: Mapping[str, Any] | None = None,
                   session: str | None = None, simulated: bool = False) -> str:
    """A new session (and incident); *simulated*: a replayed scenario, kept out of the real
    history (``--include-simulated`` shows it)."""
    now = now_utc()
    # Typed or pasted by a person: a token slips in (the symptom, the title, tags, the job).
    symptom = redact_text(symptom or "")
    tags = [redact_text(tag) for tag in tags]
    job = redact_text(job) if job else job
    if incident is None:
        incident = new_id()
        con.execute("INSERT INTO incidents (id, title, symptom, job_id, status, opened, tags, "
                    "simulated) VALUES (?, ?, ?, ?, 'open', ?, ?::VARCHAR[], ?)",
                    [incident, redact_text(title) if title else _title(symptom, runbook, hosts),
                     symptom or None, job, now, list(tags), simulated])
    else:
        incident = resolve_id(con, "incidents", incident, "incident")
    session = session or new_id()
    con.execute("INSERT INTO sessions (id, incident_id, runbook, operator, started, updated, "
                "status, hosts_n, target, simulated) "
                "VALUES (?, ?, ?, ?, ?, ?, 'running', ?, ?::JSON, ?)",
                [session, incident, runbook, operator, now, now, len(hosts),
                 _json(redact_data(dict(target))) if target else None, simulated])
    rows = []
    for host in hosts:
        host_attrs = dict(attrs.get(host) or {})
        placement = [_str_or_none(host_attrs.pop(k, None)) for k in PLACEMENT_KEYS]
        rows.append([session, host, now, *placement,
                     _json(redact_data(host_attrs)) if host_attrs else None])
    insert_rows(con, "hosts", [("session_id", "VARCHAR"), ("host", "VARCHAR"),
                               ("ts", "TIMESTAMP"), ("rack", "VARCHAR"), ("leaf", "VARCHAR"),
                               ("rail", "VARCHAR"), ("attrs", "JSON")], rows)
    hostincidents.refresh(con, [incident])  # the hosts are the incident's host-incidents now
    return session


def load_session(con: Connection, ident: str, path: Path | str = "") -> dict[str, Any]:
    session_id = resolve_id(con, "sessions", ident, "session", path)
    row = fetch_rows(con, "SELECT * FROM sessions WHERE id = ?", [session_id])[0]
    row["state"] = walk_state(con, session_id, row.pop("walk_state"))
    row["target"] = json.loads(row["target"]) if row.get("target") else None
    hosts = con.execute("SELECT host, rack, leaf, rail, attrs FROM hosts WHERE session_id = ? "
                        "ORDER BY host", [session_id]).fetchall()
    row["hosts"] = [h[0] for h in hosts]
    row["attrs"] = {h[0]: {**(json.loads(h[4]) if h[4] else {}),
                           **{k: v for k, v in zip(PLACEMENT_KEYS, h[1:4], strict=True)
                              if v is not None}}
                    for h in hosts}
    return row


def update_state(con: Connection, session_id: str, state: Mapping[str, Any]) -> None:
    """Save where the walk is. Its finished steps are in ``steps.record`` (each written once,
    by ``record_step``), so only the head is written here — unless *state* carries steps the
    table does not hold as live steps (a walk followed into a new session): then the whole
    state, as before schema 8."""
    status = _SESSION_STATUS.get(str(state.get("status")), "running")
    steps = state.get("steps")
    if steps:
        row = con.execute("SELECT count(*) FROM steps WHERE session_id = ? AND NOT undone "
                          "AND record IS NOT NULL", [session_id]).fetchone()
        if not row or int(row[0]) != len(steps):
            _write_state(con, session_id, redact_data(state), status)
            return
    _write_state(con, session_id, _head(state), status)


def _head(state: Mapping[str, Any]) -> dict[str, Any]:
    """The walk state without its steps (the steps are rebuilt from ``steps.record``)."""
    head: dict[str, Any] = redact_data({k: v for k, v in state.items() if k != "steps"})
    return head


def _write_state(con: Connection, session_id: str, state: Mapping[str, Any],
                 status: str) -> None:
    con.execute("UPDATE sessions SET walk_state = ?::JSON, updated = ?, status = ? "
                "WHERE id = ?", [_json(state), now_utc(), status, session_id])


def walk_state(con: Connection, session_id: str, stored: str | None) -> dict[str, Any] | None:
    """The saved walk state, with its steps: from the state itself when it carries them (a
    store before schema 8), else the live steps' records in path order, each host's facts
    put back from its probe run."""
    if not stored:
        return None
    state: dict[str, Any] = json.loads(stored)
    if "steps" in state:
        return state
    rows = con.execute("SELECT seq, record FROM steps WHERE session_id = ? AND NOT undone "
                       "AND record IS NOT NULL ORDER BY idx", [session_id]).fetchall()
    facts = {(seq, probe, host): value for seq, probe, host, value in con.execute(
        "SELECT step_seq, probe, host, facts FROM probe_runs WHERE session_id = ? AND "
        "list_contains(?, step_seq)", [session_id, [r[0] for r in rows]]).fetchall()}
    state["steps"] = []
    for seq, text in rows:
        record = json.loads(text)
        for outcome in record.get("outcomes") or []:
            for host, result in (outcome.get("hosts") or {}).items():
                if "facts" not in result:
                    result["facts"] = json.loads(facts.get((seq, outcome["probe"], host))
                                                 or "{}")
        state["steps"].append(record)
    return state


def set_status(con: Connection, session_id: str, status: str) -> None:
    con.execute("UPDATE sessions SET status = ?, updated = ? WHERE id = ?",
                [status, now_utc(), session_id])


def close_incident(con: Connection, ident: str, root_cause: str | None,
                   path: Path | str = "") -> None:
    incident = resolve_id(con, "incidents", ident, "incident", path)
    con.execute("UPDATE incidents SET status = 'closed', closed = ?, "
                "root_cause = coalesce(?, root_cause) WHERE id = ?",
                [now_utc(), redact_text(root_cause) if root_cause else None, incident])


# --- steps ---------------------------------------------------------------------------------

_STEP_COLUMNS = [("session_id", "VARCHAR"), ("seq", "INTEGER"), ("idx", "INTEGER"),
                 ("node", "VARCHAR"), ("kind", "VARCHAR"), ("answer", "VARCHAR"),
                 ("goto", "VARCHAR"), ("because", "VARCHAR"), ("started", "TIMESTAMP"),
                 ("ended", "TIMESTAMP"), ("record", "JSON")]
_PROBE_COLUMNS = [("session_id", "VARCHAR"), ("step_seq", "INTEGER"), ("step_index", "INTEGER"),
                  ("ts", "TIMESTAMP"), ("host", "VARCHAR"), ("probe", "VARCHAR"),
                  ("state", "VARCHAR"), ("reason", "VARCHAR"), ("duration_s", "DOUBLE"),
                  ("raw_hash", "VARCHAR"), ("raw_bytes", "INTEGER"), ("facts", "JSON")]
_FINDING_COLUMNS = [("session_id", "VARCHAR"), ("step_seq", "INTEGER"),
                    ("step_index", "INTEGER"), ("finding_no", "INTEGER"), ("ts", "TIMESTAMP"),
                    ("code", "VARCHAR"), ("severity", "VARCHAR"), ("host", "VARCHAR"),
                    ("hosts_n", "INTEGER"), ("probe", "VARCHAR"), ("message", "VARCHAR"),
                    ("evidence", "JSON"), ("xids", "INTEGER[]")]


def xid_codes(code: str, evidence: Mapping[str, Any]) -> list[int] | None:
    """The XID numbers of an xid-* finding (its evidence's ``xids``), else None."""
    if not code.startswith("xid-"):
        return None
    codes = []
    for value in evidence.get("xids") or []:
        try:
            codes.append(int(value))
        except (TypeError, ValueError):
            continue
    return codes or None


def record_step(con: Connection, session_id: str, index: int, step: Mapping[str, Any],
                state: Mapping[str, Any], raw: Mapping[tuple[str, str], str] | None,
                operator: str | None,
                prepared: Mapping[tuple[str, str], PreparedRun] | None = None) -> int:
    """Write one finished step with everything it saw, and the walk state after it.

    *prepared*: host rows the probe worker already made (``prepared.prepare_outcome``); a
    run without one is prepared here, by the same code. Returns the step's ``seq``. Rows
    already live at this index or later (a walk resumed from an older state) are marked
    undone first, so the live steps always form the walk's path.
    """
    row = con.execute("SELECT coalesce(max(seq) + 1, 0) FROM steps WHERE session_id = ?",
                      [session_id]).fetchone()
    seq = int(row[0]) if row else 0
    con.execute("UPDATE steps SET undone = true WHERE session_id = ? AND idx >= ? "
                "AND NOT undone", [session_id, index])
    # Each host's facts and raw output become its probe run (redacted there, once per
    # distinct output); what is left of the step — its record, findings, action — is
    # redacted in one pass here.
    light, runs = split_step(step, raw, prepared)
    step = redact_data(light)
    started, ended = utc(step.get("started")), utc(step.get("ended") or step.get("started"))
    at = ended or now_utc()
    insert_rows(con, "steps", _STEP_COLUMNS, [[
        session_id, seq, index, step["node"], step["kind"], step.get("answer"),
        step.get("goto"), step.get("because") or None, started or at, at, _json(step)]])

    probe_rows: list[list[Any]] = []
    finding_rows: list[list[Any]] = []
    figure_rows: list[list[Any]] = []
    blobs: dict[str, list[Any]] = {}
    finding_no = 0
    for outcome, mine in zip(step.get("outcomes") or [], runs, strict=True):
        probe = outcome["probe"]
        for (host, result), run in zip((outcome.get("hosts") or {}).items(), mine,
                                       strict=True):
            if run.blob is not None:
                blobs[run.blob[0]] = run.blob
            probe_rows.append([
                session_id, seq, index, at, host, probe, result.get("state", "ok"),
                result.get("reason") or None, float(result.get("duration_s") or 0.0),
                run.raw_hash, run.raw_bytes, run.facts])
            figure_rows.extend([session_id, seq, at, host, *fig] for fig in run.figures)
        for finding in outcome.get("findings") or []:
            evidence = finding.get("evidence") or {}
            hosts: Iterable[str | None] = finding.get("hosts") or [None]
            hosts_n = len(finding.get("hosts") or [])
            message = finding.get("message") or ""
            xids = xid_codes(finding["code"], evidence)
            hosts = list(hosts)
            for host, evidence_json in zip(hosts, host_rows(evidence, _json(evidence), hosts),
                                           strict=True):
                finding_rows.append([session_id, seq, index, finding_no, at, finding["code"],
                                     finding.get("severity", "warning"), host, hosts_n,
                                     finding.get("probe") or probe, message, evidence_json,
                                     xids])
            finding_no += 1
    add_blobs(con, blobs.values())
    insert_rows(con, "probe_runs", _PROBE_COLUMNS, probe_rows)
    insert_rows(con, "findings", _FINDING_COLUMNS, finding_rows)
    insert_rows(con, "acceptance", _ACCEPT_COLUMNS, figure_rows)
    if finding_rows or any(o.get("probe") == "versions" for o in step.get("outcomes") or []):
        hostincidents.refresh_session(con, session_id)  # new units, or a host's versions

    action = step.get("action")
    if action:
        confirmed = bool(action.get("confirmed"))
        insert_rows(con, "actions", [
            ("session_id", "VARCHAR"), ("step_seq", "INTEGER"), ("step_index", "INTEGER"),
            ("ts", "TIMESTAMP"), ("node", "VARCHAR"), ("command", "VARCHAR"),
            ("hosts", "VARCHAR[]"), ("confirmed", "BOOLEAN"), ("confirmed_by", "VARCHAR"),
            ("result", "VARCHAR")], [[
                session_id, seq, index, at, step["node"], action.get("command"),
                list(action.get("hosts") or []), confirmed, operator if confirmed else None,
                action.get("result") or None]])

    # The step just written is the last live one: the steps are in the table, the head here.
    _write_state(con, session_id, _head(state),
                 _SESSION_STATUS.get(str(state.get("status")), "running"))
    if state.get("status") == "concluded":
        con.execute("UPDATE sessions SET ended = ?, conclusion = ? WHERE id = ?",
                    [at, step["node"], session_id])
        con.execute("UPDATE incidents SET conclusion = s.runbook || '/' || ? FROM sessions s "
                    "WHERE s.id = ? AND incidents.id = s.incident_id "
                    "AND incidents.status = 'open'", [step["node"], session_id])
    return seq


_ACCEPT_COLUMNS = [
    ("session_id", "VARCHAR"), ("step_seq", "INTEGER"), ("ts", "TIMESTAMP"), ("host", "VARCHAR"),
    ("level", "INTEGER"), ("test", "VARCHAR"), ("gpu", "INTEGER"), ("metric", "VARCHAR"),
    ("value", "DOUBLE"), ("unit", "VARCHAR"), ("op", "VARCHAR"), ("threshold", "DOUBLE"),
    ("verdict", "VARCHAR"), ("source", "VARCHAR"), ("detail", "JSON")]


def record_samples(con: Connection, session_id: str, probe: str, seq: int, ts: float,
                   samples: Mapping[str, Mapping[str, Any]]) -> None:
    """One round of a sampling probe, every host's state and counters."""
    at = utc(ts) or now_utc()
    insert_rows(con, "samples", [
        ("session_id", "VARCHAR"), ("probe", "VARCHAR"), ("seq", "INTEGER"),
        ("ts", "TIMESTAMP"), ("host", "VARCHAR"), ("state", "VARCHAR"), ("reason", "VARCHAR"),
        ("counters", "JSON")],
        [[session_id, probe, seq, at, host, sample.get("state") or "ok",
          redact_text(sample.get("reason") or "") or None,
          _json(redact_data(sample.get("counters")))]
         for host, sample in samples.items()])


def session_samples(con: Connection, session_id: str) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """The rounds a session's soak or watch recorded (probe -> host -> samples in order), in
    the form ``runbook.sampling`` takes as ``prior_samples``: an interrupted soak resumes from
    them and ends when its original duration is over (XID lines are not kept: a later round's
    dmesg shows them again). A row holds the counters that changed since the host's previous
    one (the Recorder's ``_changed``; None: no longer read): each sample is rebuilt whole."""
    out: dict[str, dict[str, list[dict[str, Any]]]] = {}
    now: dict[tuple[str, str], dict[str, Any]] = {}
    for row in fetch_rows(con, "SELECT probe, seq, ts, host, state, reason, counters FROM "
                          "samples WHERE session_id = ? ORDER BY probe, host, seq",
                          [session_id]):
        counters = row["counters"]
        changed = json.loads(counters) if isinstance(counters, str) else counters
        whole = None
        if isinstance(changed, dict):
            whole = now.setdefault((row["probe"], row["host"]), {})
            whole.update(changed)
            whole = {name: value for name, value in whole.items() if value is not None}
            now[(row["probe"], row["host"])] = whole
        out.setdefault(row["probe"], {}).setdefault(row["host"], []).append({
            "seq": int(row["seq"]), "ts": row["ts"].replace(tzinfo=timezone.utc).timestamp(),
            "state": row["state"], "reason": row["reason"] or "",
            "counters": dict(whole) if whole is not None else None,
            "missing": [], "xid_lines": []})
    return out


def record_conclusion(con: Connection, session_id: str, node: str, title: str, cause: str,
                      severity: str) -> None:
    """The conclusion's words on the session, and on its incident while that is open.

    An 'info' conclusion ("nothing found") never replaces a root cause an earlier session of
    the same incident established.
    """
    # A runbook's words, but filled in with what the walk found (host names, values).
    outcome = redact_text(f"{title}: {cause}" if cause else title)
    con.execute("UPDATE sessions SET outcome = ?, severity = ?, conclusion = ? WHERE id = ?",
                [outcome, severity, node, session_id])
    con.execute("UPDATE incidents SET root_cause = ?, conclusion = s.runbook || '/' || ? "
                "FROM sessions s WHERE s.id = ? AND incidents.id = s.incident_id "
                "AND incidents.status = 'open' AND (incidents.root_cause IS NULL OR ? <> 'info')",
                [outcome, node, session_id, severity])
    if severity != "info":  # a title made of runbook and hosts names the culprit and cause
        con.execute("""
            UPDATE incidents SET title = left(coalesce((
                SELECT string_agg(DISTINCT f.host, ', ' ORDER BY f.host) FROM findings f
                WHERE f.session_id = ? AND f.severity IN ('critical', 'error')
                  AND f.host IS NOT NULL) || ': ', '') || ?, 100)
            FROM sessions s WHERE s.id = ? AND incidents.id = s.incident_id
              AND incidents.status = 'open' AND coalesce(incidents.symptom, '') = ''
              AND incidents.title LIKE s.runbook || ' on %'""",
                    [session_id, redact_text(title), session_id])


def record_undo(con: Connection, session_id: str, node: str, choice: str) -> int | None:
    """The operator took back the answer *choice* to *node*: that step and every later live
    step are flagged undone, and the resume point goes back to the question (as Walk.undo).

    Returns the index the walk went back to, or None when there was no such live answer.
    """
    row = con.execute("SELECT idx FROM steps WHERE session_id = ? AND node = ? AND answer = ? "
                      "AND NOT undone ORDER BY seq DESC LIMIT 1",
                      [session_id, node, choice]).fetchone()
    if row is None:
        return None
    index = int(row[0])
    con.execute("UPDATE steps SET undone = true WHERE session_id = ? AND idx >= ? "
                "AND NOT undone", [session_id, index])
    stored = con.execute("SELECT walk_state FROM sessions WHERE id = ?",
                         [session_id]).fetchone()
    state = walk_state(con, session_id, stored[0] if stored else None)
    if state:
        state["steps"] = state.get("steps", [])[:index]
        state["current"] = node
        state["status"] = "ready"
        (state.get("pending_answers") or {}).pop(node, None)
        update_state(con, session_id, state)
    return index
