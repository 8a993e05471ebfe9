"""``diag report INCIDENT``: a post-mortem draft assembled from what the store recorded.

The author of a post-mortem needs the facts in order before the story: when each step was
taken and why, which hosts were involved and where they sit, what evidence each finding
carries, what was concluded and what was done about it — and whether this has happened
before. The draft is Markdown to paste into the post-mortem document, or JSON for tooling;
everything in it comes from the store (no host is contacted).
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from probes.hostfold import fold_counted

from .base import Connection, StoreError, fetch_rows, resolve_id, sql_list
from .evidence import not_evidence
from .textfmt import duration, when
from .window_summary import markdown as window_markdown
from .window_summary import window_summaries

_RANK = {"critical": 3, "error": 2, "warning": 1, "info": 0}
SIMILAR_LIMIT = 5


def incident_report(con: Connection, ident: str, path: str = "",
                    include_simulated: bool = False) -> dict[str, Any]:
    """Everything about one incident (id, unique prefix, or 'latest').

    'latest' and the similar past incidents leave simulated ones (replayed scenarios) out
    unless *include_simulated*; an incident asked for by its id is reported either way."""
    if ident == "latest":
        row = con.execute("SELECT id FROM incidents WHERE ? OR NOT coalesce(simulated, false) "
                          "ORDER BY opened DESC LIMIT 1", [include_simulated]).fetchone()
        if row is None:
            raise StoreError("no incidents recorded yet" + (
                "" if include_simulated else " (simulated ones are left out: "
                "--include-simulated shows them)"))
        ident = str(row[0])
    incident_id = resolve_id(con, "incidents", ident, "incident", path)
    incident = fetch_rows(con, "SELECT * FROM incidents WHERE id = ?", [incident_id])[0]
    sessions = fetch_rows(con, """
        SELECT id, runbook, operator, started, ended, status, conclusion, outcome, severity,
               hosts_n, epoch(ended - started) AS duration_s
        FROM sessions WHERE incident_id = ? ORDER BY started""", [incident_id])
    ids = [s["id"] for s in sessions]
    in_sessions = f"session_id IN ({sql_list(ids)})"
    runbook_of = {s["id"]: s["runbook"] for s in sessions}
    operator_of = {s["id"]: s["operator"] for s in sessions}

    timeline = fetch_rows(con, f"""
        SELECT st.started AS ts, st.session_id AS session, st.seq, st.idx, st.node, st.kind,
               st.answer, st.goto, st.because, st.undone,
               (SELECT count(DISTINCT (f.finding_no)) FROM findings f
                WHERE f.session_id = st.session_id AND f.step_seq = st.seq) AS findings
        FROM steps st WHERE st.{in_sessions} ORDER BY st.started, st.session_id, st.seq""")
    for step in timeline:
        step["runbook"] = runbook_of.get(step["session"])
        step["operator"] = operator_of.get(step["session"])

    findings = fetch_rows(con, f"""
        SELECT session_id AS session, step_seq, finding_no, any_value(code) AS code,
               any_value(severity) AS severity, any_value(probe) AS probe,
               any_value(message) AS message,
               -- the first host's row keeps it whole (evidence_rows), the others their part
               arg_max(evidence, length(evidence::VARCHAR)) AS evidence,
               list(host ORDER BY host) FILTER (host IS NOT NULL) AS hosts, min(ts) AS ts
        FROM findings WHERE {in_sessions}
        GROUP BY session_id, step_seq, finding_no""")
    for f in findings:
        f["evidence"] = json.loads(f["evidence"]) if f["evidence"] else {}
        f["hosts"] = f["hosts"] or []
    findings = _distinct(findings)

    hosts = fetch_rows(con, f"""
        WITH h AS (SELECT host, arg_max(rack, ts) AS rack, arg_max(leaf, ts) AS leaf,
                          arg_max(rail, ts) AS rail FROM hosts WHERE {in_sessions} GROUP BY host),
        f AS (SELECT host, count(*) AS findings,
                     list(DISTINCT code ORDER BY code) AS codes,
                     max(CASE severity WHEN 'critical' THEN 3 WHEN 'error' THEN 2
                                       WHEN 'warning' THEN 1 ELSE 0 END) AS worst
              FROM findings WHERE {in_sessions} AND host IS NOT NULL GROUP BY host),
        p AS (SELECT host, list(DISTINCT probe || ': ' || state || coalesce(' (' || reason || ')',
                                                                            '')) AS problems
              FROM probe_runs WHERE {in_sessions} AND state <> 'ok' GROUP BY host)
        SELECT h.*, coalesce(f.findings, 0) AS findings, coalesce(f.codes, []) AS codes,
               coalesce(f.worst, -1) AS worst, coalesce(p.problems, []) AS problems
        FROM h LEFT JOIN f USING (host) LEFT JOIN p USING (host)
        ORDER BY worst DESC, findings DESC, host""")
    # Involved = accused: a host with a finding that is evidence (not diag's own "could not
    # look", not info). Hosts with only such notes, or probe trouble, are listed apart.
    from probes.catalog import load_catalog

    blind = set(load_catalog().category("not-evidence"))
    involved = [h for h in hosts if h["worst"] >= 1 and set(h["codes"]) - blind]
    noted = [h for h in hosts if (h["findings"] or h["problems"]) and h not in involved]
    for h in hosts:
        h["worst"] = {v: k for k, v in _RANK.items()}.get(h["worst"])

    actions = fetch_rows(con, f"""
        SELECT ts, session_id AS session, node, command, hosts, confirmed, confirmed_by, result
        FROM actions WHERE {in_sessions} ORDER BY ts""")
    outside = fetch_rows(con, "SELECT ts, operator, kind, text FROM incident_actions "
                              "WHERE incident_id = ? ORDER BY ts, id", [incident["id"]])
    return {
        "incident": incident,
        "sessions": sessions,
        "timeline": timeline,
        "hosts": {"total": len(hosts), "involved": involved, "noted": noted,
                  "all": [h["host"] for h in hosts]},
        "evidence": findings,
        "monitoring": window_summaries(findings),
        "conclusions": [{"session": s["id"], "runbook": s["runbook"], "node": s["conclusion"],
                         "outcome": s["outcome"], "severity": s["severity"]}
                        for s in sessions if s["conclusion"]],
        "actions": actions,
        "actions_outside": outside,
        "similar": similar_incidents(con, incident, ids, include_simulated),
    }


def _distinct(findings: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One entry per distinct finding (code, severity, probe, message, hosts, evidence), with
    the walks it came from (``sessions``), worst first: three walks that saw the same XID are
    one line, not three."""
    merged: dict[str, dict[str, Any]] = {}
    for f in sorted(findings, key=lambda f: f["ts"]):
        key = json.dumps([f["code"], f["severity"], f["probe"], f["message"], f["hosts"],
                          f["evidence"]], sort_keys=True, default=str)
        if key in merged:
            if f["session"] not in merged[key]["sessions"]:
                merged[key]["sessions"].append(f["session"])
        else:
            merged[key] = {**f, "sessions": [f["session"]]}
    out = list(merged.values())
    out.sort(key=lambda f: (-_RANK.get(f["severity"], 0), f["code"], f["ts"]))
    return out


def similar_incidents(con: Connection, incident: dict[str, Any], session_ids: list[str],
                      include_simulated: bool = False) -> list[dict[str, Any]]:
    """Earlier incidents that look like this one: the same conclusion, overlapping finding
    codes (diag's own can't-measure codes aside), or the same hosts with findings again."""
    in_sessions = f"session_id IN ({sql_list(session_ids)})"
    mine = con.execute(f"""
        SELECT list(DISTINCT code) FILTER (code NOT IN ({sql_list(not_evidence())})
                                           AND severity <> 'info'),
               list(DISTINCT host) FILTER (severity IN ('error', 'critical'))
        FROM findings WHERE {in_sessions}""").fetchone()
    codes = [c for c in (mine[0] if mine else None) or [] if c]
    bad_hosts = [h for h in (mine[1] if mine else None) or [] if h]
    conclusions = [r[0] for r in con.execute(
        f"SELECT DISTINCT runbook || '/' || conclusion FROM sessions "
        f"WHERE id IN ({sql_list(session_ids)}) AND conclusion IS NOT NULL").fetchall()]
    if incident.get("conclusion"):
        conclusions = sorted({*conclusions, incident["conclusion"]})
    rows = fetch_rows(con, f"""
        WITH past AS (SELECT id, title, opened, status, root_cause, conclusion FROM incidents
                      WHERE opened < ? AND id <> ? AND status <> 'merged'
                        AND (? OR NOT coalesce(simulated, false))),
        same AS (SELECT DISTINCT s.incident_id AS id FROM sessions s
                 WHERE s.runbook || '/' || s.conclusion IN ({sql_list(conclusions)})
                 UNION SELECT id FROM past WHERE conclusion IN ({sql_list(conclusions)})),
        fc AS (SELECT s.incident_id AS id,
                      list(DISTINCT f.code) FILTER (f.code IN ({sql_list(codes)})) AS shared_codes,
                      count(DISTINCT f.code) FILTER (f.code NOT IN ({sql_list(not_evidence())})
                                                     AND f.severity <> 'info') AS codes_n,
                      list(DISTINCT f.host) FILTER (f.host IN ({sql_list(bad_hosts)})
                                                    AND f.severity IN ('error', 'critical'))
                          AS shared_hosts
               FROM findings f JOIN sessions s ON s.id = f.session_id
               WHERE s.incident_id IN (SELECT id FROM past)
                 AND (f.code IN ({sql_list(codes)}) OR f.host IN ({sql_list(bad_hosts)}))
               GROUP BY 1)
        SELECT past.*, same.id IS NOT NULL AS same_conclusion,
               coalesce(fc.shared_codes, []) AS shared_codes,
               coalesce(fc.shared_hosts, []) AS shared_hosts
        FROM past LEFT JOIN same USING (id) LEFT JOIN fc USING (id)
        WHERE same.id IS NOT NULL OR fc.id IS NOT NULL""",
                 [incident["opened"], incident["id"], include_simulated])
    if not rows:
        return []
    totals = {r[0]: int(r[1]) for r in con.execute(f"""
        SELECT s.incident_id, count(DISTINCT f.code) FROM findings f
        JOIN sessions s ON s.id = f.session_id
        WHERE s.incident_id IN ({sql_list([r['id'] for r in rows])})
          AND f.code NOT IN ({sql_list(not_evidence())}) AND f.severity <> 'info'
        GROUP BY 1""").fetchall()}
    scored = []
    for row in rows:
        shared = sorted(row["shared_codes"])
        union = len(codes) + totals.get(row["id"], 0) - len(shared)
        jaccard = len(shared) / union if union else 0.0
        score = 3.0 * bool(row["same_conclusion"]) + 3.0 * jaccard \
            + 0.5 * min(len(row["shared_hosts"]), 4)
        reasons = []
        if row["same_conclusion"]:
            reasons.append(f"same conclusion ({row['conclusion'] or 'a session of it'})")
        if shared:
            reasons.append(f"{len(shared)} shared finding code(s): {', '.join(shared[:6])}")
        if row["shared_hosts"]:
            hosts = ", ".join(sorted(row["shared_hosts"])[:6])
            reasons.append(f"same host(s) with errors: {hosts}")
        if score >= 1.0:
            scored.append({"id": row["id"], "title": row["title"], "opened": row["opened"],
                           "status": row["status"], "root_cause": row["root_cause"],
                           "score": round(score, 2), "reasons": reasons})
    scored.sort(key=lambda r: (-r["score"], -r["opened"].timestamp()
                               if isinstance(r["opened"], datetime) else 0))
    return scored[:SIMILAR_LIMIT]


# --- Markdown -------------------------------------------------------------------------------

def report_markdown(report: dict[str, Any]) -> str:
    inc = report["incident"]
    out = [f"# Incident {inc['id']}: {inc['title']}", ""]
    if inc.get("simulated"):
        out += ["> Simulated: a replayed scenario (`diag --demo`, `--scenario`), not a real "
                "incident.", ""]
    out += [f"- **Status:** {inc['status']}"
            + (f" into {inc['merged_into']}" if inc.get("merged_into") else "")
            + (f", closed {when(inc['closed'])} UTC" if inc.get("closed") else "")
            + (f" by {inc['closed_by']}" if inc.get("closed_by") else ""),
            f"- **Opened:** {when(inc['opened'])} UTC"]
    if inc.get("job_id"):
        out.append(f"- **Job:** {inc['job_id']}")
    if inc.get("tags"):
        out.append(f"- **Tags:** {', '.join(inc['tags'])}")
    out.append(f"- **Root cause:** {inc.get('root_cause') or 'not established'}")
    if inc.get("symptom"):
        out += ["", "## Symptom", "", *[f"> {line}" for line in inc["symptom"].splitlines()]]

    out += ["", "## Sessions", ""]
    out += _md_table(["session", "runbook", "operator", "started (UTC)", "took", "status",
                      "conclusion"],
                     [[s["id"], s["runbook"], s["operator"], when(s["started"]),
                       duration(s["duration_s"]), s["status"], s["conclusion"] or "-"]
                      for s in report["sessions"]])

    out += ["", "## Timeline", ""]
    rows = []
    for step in report["timeline"]:
        what = step["because"] or ""
        if step["answer"]:
            what = f"answered {step['answer']}" + (f" ({what})" if what else "")
        if step["undone"]:
            what = f"~~{what or 'step'}~~ (undone)"
        rows.append([when(step["ts"]), step["session"], step.get("operator") or "-",
                     f"{step['node']} ({step['kind']})", what or "-", step["goto"] or "-",
                     step["findings"] or ""])
    out += _md_table(["time (UTC)", "session", "operator", "step", "why / answer", "next",
                      "findings"], rows)

    hosts = report["hosts"]
    out += ["", "## Hosts involved", "",
            f"{len(hosts['involved'])} of {hosts['total']} host(s) are accused by a finding."]
    if hosts.get("noted"):
        out.append(f"Only notes (not measured, or a probe could not run) on "
                   f"{fold_counted([h['host'] for h in hosts['noted']])}: not counted as "
                   "involved.")
    if hosts["involved"]:
        out.append("")
        out += _md_table(["host", "rack", "leaf", "rail", "worst", "findings", "codes",
                          "probe problems"],
                         [[h["host"], h["rack"] or "-", h["leaf"] or "-", h["rail"] or "-",
                           h["worst"] or "-", h["findings"], ", ".join(h["codes"]) or "-",
                           "; ".join(h["problems"]) or "-"] for h in hosts["involved"][:60]])

    out += ["", "## Evidence", ""]
    if not report["evidence"]:
        out.append("No findings were recorded.")
    for f in report["evidence"][:60]:
        hosts_txt = fold_counted(f["hosts"], empty="no specific host")
        walks = (f" — in {len(f['sessions'])} walks: {', '.join(f['sessions'])}"
                 if len(f.get("sessions") or []) > 1 else "")
        out.append(f"- **{f['severity']}** `{f['code']}` on {hosts_txt} ({f['probe'] or '-'}): "
                   f"{f['message']}{walks}")
        if f["evidence"]:
            text = json.dumps(f["evidence"], ensure_ascii=False, default=str)
            out.append(f"  - evidence: `{text if len(text) <= 300 else text[:299] + '…'}`")

    out += window_markdown(report.get("monitoring") or [])

    out += ["", "## Conclusion", ""]
    if not report["conclusions"]:
        out.append("No session reached a conclusion.")
    for c in report["conclusions"]:
        out.append(f"- `{c['runbook']}/{c['node']}` [{c['severity'] or '-'}] "
                   f"(session {c['session']}): {c['outcome'] or '-'}")

    out += ["", "## Actions", ""]
    if not report["actions"] and not report.get("actions_outside"):
        out.append("No remediation was decided.")
    for a in report.get("actions_outside") or []:
        out.append(f"- {when(a['ts'])} UTC {a['kind']} (outside diag, recorded by "
                   f"{a['operator']}): {a['text']}")
    for a in report["actions"]:
        who = f"confirmed by {a['confirmed_by']}" if a["confirmed"] else "not confirmed"
        hosts_txt = fold_counted(a["hosts"], empty="no specific host")
        out.append(f"- {when(a['ts'])} UTC `{a['node']}`: `{a['command'] or '(advice)'}` on "
                   f"{hosts_txt} — {who}; result: {a['result'] or '-'}")

    out += ["", "## Similar past incidents", ""]
    if not report["similar"]:
        out.append("None found.")
    for s in report["similar"]:
        out.append(f"- `{s['id']}` {when(s['opened'])} UTC — {s['title']} ({s['status']}); "
                   f"root cause: {s['root_cause'] or 'not established'}. "
                   f"Why similar: {'; '.join(s['reasons'])}.")
    out += ["", "## Follow-ups", "", "- [ ] _what will prevent this next time_", ""]
    return "\n".join(out)


def _md_table(headers: list[str], rows: list[list[Any]]) -> list[str]:
    if not rows:
        return ["(none)"]

    def esc(value: Any) -> str:
        return str(value).replace("|", "\\|").replace("\n", " ")

    return ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers),
            *["| " + " | ".join(esc(v) for v in row) + " |" for row in rows]]


