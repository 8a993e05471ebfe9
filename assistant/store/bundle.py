"""``diag bundle INCIDENT``: what a hardware or network ticket needs, in one reproducible file.

A vendor's support asks for the same things each time — ``nvidia-bug-report.sh`` and ``sos``
collect them on the node: the kernel's XID / link lines, ``nvidia-smi -q`` of the GPU in
question, the driver and firmware versions, what was seen and what was done. diag already
recorded all of that during the walks, so the bundle is assembled from the store (no host is
contacted):

    diag-bundle-ID/README.txt           what the bundle is, each file, the driver and serials
    diag-bundle-ID/manifest.json        every file: size, sha256, what it is; what was left out
    diag-bundle-ID/report.md|json       the post-mortem draft (diag report)
    diag-bundle-ID/walks.json           each walk's path, answers and actions taken
    diag-bundle-ID/versions.json        driver / NCCL / kernel / firmware per involved host, the
                                        driver version and GPU serials / UUIDs from every source
    diag-bundle-ID/commands.json        the command line of each section of each raw output
    diag-bundle-ID/kernel/HOST.txt      the XID and link lines of the kernel log
    diag-bundle-ID/gpus/HOST-BUS.txt    nvidia-smi -q of each accused GPU
    diag-bundle-ID/raw/HOST/PROBE-S-N.txt   the raw output behind each finding

It is **bounded** (``max_bytes``, files in order of use to a ticket: the small summaries
first, then the outputs behind critical findings, then error, warning; what does not fit is
named in the manifest), **reproducible** (no clock: times come from the store, tar entries
carry the incident's last change as their time, sorted, no owner; gzip without a name or a
time — the same store gives the same bytes), and **never contains a secret**: the store
redacted everything on the way in, and every file passes through the redactor again on the
way out (a symptom typed by hand, a report's evidence).

It **stays inside its directory** when extracted. Host and probe names and ids are the
store's, and the store holds what any import brought: a host named ``../../../../escaped``
was a tar member that ``tar`` and ``extractall`` wrote four levels up. Every name is made one
plain path component (``Names``), unique in the bundle, and the tar writer refuses a member
that is absolute, climbs, or is not a regular file, whatever called it.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import re
import tarfile
from datetime import datetime, timezone
from typing import Any

from probes.base import leaves

from .base import Connection, fetch_rows, sql_list
from .bundle_facts import identity, probe_commands, readme
from .incidents import resolve
from .raw import RawOutput, raw_outputs
from .redact import redact_text
from .reports import incident_report, report_markdown

FORMAT = "diag-bundle/1"
DEFAULT_MAX_BYTES = 16 * 1024 * 1024  # uncompressed: a ticket system's attachment limit
_RANK = {"critical": 0, "error": 1, "warning": 2, "info": 3}
# Kernel lines a hardware or network ticket asks for: NVIDIA's XID / SXid reports and GPU
# bus drops (NVIDIA "XID Errors" guide), and InfiniBand / Ethernet link state changes as
# mlx5_core and the IB core log them.
KERNEL_LINE = re.compile(
    r"NVRM: (?:Xid|SXid|GPU at PCI|GPU [0-9a-f:.]+: GPU has fallen)|SXid|fallen off the bus"
    r"|mlx5_core.*(?:[Ll]ink (?:down|up)|port .*(?:state|down|up)|module|cable)"
    r"|NETDEV WATCHDOG|ib\w*: .*(?:link|port).*(?:down|up|state)", re.IGNORECASE)
# A PCI address with its domain, as nvidia-smi (00000000:4C:00.0) and the driver (0000:4c:00)
# print it; the domain keeps times and ratios from matching.
_BUS = re.compile(r"\b[0-9a-fA-F]{4,8}:([0-9a-fA-F]{2}):([0-9a-fA-F]{2})(?:\.[0-7])?\b")
_GPU_LABEL = re.compile(r"^GPU(\d+)$")
_QUERY_ROW = re.compile(r"^\s*(\d+),\s*[^,]*,\s*([0-9A-Fa-f]{4,8}:[0-9A-Fa-f:.]+)", re.MULTILINE)
_GPU_CODES = ("xid-", "gpu-", "ecc-", "row-remap")
# A name kept as it is in a path: what host names, probe names and ids are when nothing is
# wrong with them. Anything else is rewritten (Names).
NAME_MAX = 64
_PLAIN = re.compile(rf"[A-Za-z0-9_][A-Za-z0-9._-]{{0,{NAME_MAX - 1}}}")
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


class Names:
    """One bundle's path components for the names its store holds (hosts, probes, ids).

    A plain name is kept (letters, digits, '.', '_', '-'; not starting with '.' or '-'; at
    most NAME_MAX). Any other — '/', '..', a leading '-', control characters, too long — has
    every other character made '_' and a leading '.' or '-' too, is cut, and ends in '~' and
    12 hex digits of its SHA-256: no plain name holds a '~', so a rewritten name never meets
    a kept one, and two rewritten names differ by their hash (``a/b`` and ``a:b`` are both
    ``a_b`` otherwise). Names that would still meet — or differ only in case, one file on a
    Mac or Windows — get a counter. The same name gives the same component every time, and
    names come in the bundle's own order, so the bundle stays reproducible.
    """

    def __init__(self) -> None:
        self._given: dict[str, str] = {}
        self._taken: set[str] = set()

    def component(self, name: str) -> str:
        """*name* as one path component of this bundle."""
        if name not in self._given:
            if _PLAIN.fullmatch(name):
                out = name
            else:
                clean = _UNSAFE.sub("_", name)
                clean = "_" + clean[1:] if clean[:1] in (".", "-") else clean
                digest = hashlib.sha256(name.encode("utf-8", "replace")).hexdigest()[:12]
                out = f"{clean[:NAME_MAX - 13]}~{digest}"
            self._given[name] = self.unique(out)
        return self._given[name]

    def unique(self, path: str) -> str:
        """*path*, or *path* with a counter before its extension when the bundle has it."""
        stem, dot, ext = path.rpartition(".") if "." in path.rsplit("/", 1)[-1] \
            else (path, "", "")
        out, n = path, 2
        while out.casefold() in self._taken:
            out, n = f"{stem}~{n}{dot}{ext}", n + 1
        self._taken.add(out.casefold())
        return out


def _bus_key(text: str) -> str | None:
    m = _BUS.search(text)
    return f"{m.group(1)}:{m.group(2)}".lower() if m else None


def _section(text: str, name: str) -> str | None:
    """One ``=== diag:section NAME`` of a probe's output (the script's own framing)."""
    m = re.search(rf"^=== diag:section {re.escape(name)}\n(.*?)(?=^=== diag:|\Z)", text,
                  re.MULTILINE | re.DOTALL)
    return m.group(1) if m else None


def gpu_block(smi_q: str, bus: str) -> str | None:
    """From ``nvidia-smi -q`` output: its header and the ``GPU 00000000:4C:00.0`` block of
    the GPU on *bus* ('4c:00'), or the lines that name that GPU (a lost GPU has no block)."""
    lines = smi_q.splitlines()
    first = next((i for i, ln in enumerate(lines) if ln.startswith("GPU ")), len(lines))
    header = [ln for ln in lines[:first] if ln.strip()]
    out, inside = [], False
    for line in lines:
        if line.startswith("GPU "):
            inside = _bus_key(line) == bus
        if inside:
            out.append(line)
    if not out:
        out = [ln for ln in lines if _bus_key(ln) == bus]
    return "\n".join([*header, *out]) + "\n" if out else None


def build(con: Connection, ident: str, *, max_bytes: int = DEFAULT_MAX_BYTES,
          version: str = "", path: str = "") -> tuple[bytes, dict[str, Any]]:
    """The bundle of one incident as .tar.gz bytes, and its manifest."""
    incident_id = resolve(con, ident, path)
    report = incident_report(con, incident_id, path)
    inc = report["incident"]
    sessions = [s["id"] for s in report["sessions"]]
    names = Names()
    prefix = f"diag-bundle-{names.component(incident_id)}"
    files: list[tuple[str, str, str]] = [  # (path, what, text), in order of use
        ("report.md", "the post-mortem draft (diag report)", report_markdown(report)),
        ("report.json", "the same as JSON", _json(report)),
        ("walks.json", "each walk's path, answers and actions", _json(_walks(con, sessions))),
    ]
    evidence = _evidence(con, sessions)
    hosts = sorted({e["host"] for e in evidence})
    outputs = raw_outputs(con, sessions)
    ids = identity(con, sessions, hosts, outputs)
    files.append(("versions.json", "driver / NCCL / kernel / firmware per host with findings; "
                  "driver version and GPU serials / UUIDs with where each was found",
                  _json(_versions(con, sessions, hosts, ids))))
    files += _kernel_files(outputs, hosts, names)
    files += _gpu_files(outputs, evidence, names)
    first_raw = len(files)
    raw = _raw_files(outputs, evidence, names)
    files += [(where, what, text) for where, what, text, _ in raw]
    paths = Names()  # two paths made of names may still meet (probe-a + b, probe + a-b)
    files = [(paths.unique(name), what, text) for name, what, text in files]
    commands = {files[first_raw + i][0]: {"probe": probe, "sections": probe_commands(probe)}
                for i, (_, _, _, probe) in enumerate(raw)}
    files.insert(4, (paths.unique("commands.json"), "the command line of each section of each "
                     "raw output (as this diag builds its probes)", _json(commands)))
    stamp = inc.get("updated") or inc.get("closed") or inc["opened"]
    as_of = stamp.replace(tzinfo=timezone.utc).isoformat() if isinstance(stamp, datetime) \
        else str(stamp)
    files.insert(0, (paths.unique("README.txt"), "what this bundle is and holds",
                     readme(incident_id, inc, as_of, version, ids, files)))

    kept: list[dict[str, Any]] = []
    omitted: list[dict[str, Any]] = []
    blobs: dict[str, bytes] = {}
    used = 0
    for name, what, text in files:
        data = redact_text(text).encode("utf-8", "replace")
        if used + len(data) > max_bytes:
            omitted.append({"path": name, "bytes": len(data), "what": what,
                            "why": f"over the bundle's {max_bytes} byte bound"})
            continue
        used += len(data)
        blobs[name] = data
        kept.append({"path": name, "bytes": len(data), "what": what,
                     "sha256": hashlib.sha256(data).hexdigest()})
    manifest = {
        "format": FORMAT, "incident": incident_id, "title": redact_text(inc["title"]),
        "status": inc["status"], "root_cause": redact_text(inc.get("root_cause") or "") or None,
        "as_of": as_of,
        "made_by": f"diag {version}".strip(), "sessions": sessions, "hosts": hosts,
        "max_bytes": max_bytes, "bytes": used, "files": kept, "omitted": omitted,
        "secrets": "every file was redacted when recorded and again when bundled "
                   "(keys, tokens, passwords, credentials in URLs: [REDACTED])"}
    blobs["manifest.json"] = _json(manifest).encode()
    return _tar_gz(prefix, blobs, stamp), manifest


def _json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, default=str, sort_keys=True) + "\n"


def _walks(con: Connection, sessions: list[str]) -> list[dict[str, Any]]:
    out = fetch_rows(con, f"""
        SELECT id AS session, runbook, operator, started, ended, status, conclusion, outcome
        FROM sessions WHERE id IN ({sql_list(sessions)}) ORDER BY started, id""")
    steps = fetch_rows(con, f"""
        SELECT session_id, idx, node, kind, answer, goto, because, started, undone
        FROM steps WHERE session_id IN ({sql_list(sessions)}) ORDER BY session_id, seq""")
    actions = fetch_rows(con, f"""
        SELECT session_id, node, command, hosts, confirmed, confirmed_by, result, ts
        FROM actions WHERE session_id IN ({sql_list(sessions)}) ORDER BY session_id, ts""")
    for walk in out:
        walk["path"] = [{k: v for k, v in s.items() if k != "session_id"}
                        for s in steps if s["session_id"] == walk["session"]]
        walk["actions"] = [{k: v for k, v in a.items() if k != "session_id"}
                           for a in actions if a["session_id"] == walk["session"]]
    return out


def _evidence(con: Connection, sessions: list[str]) -> list[dict[str, Any]]:
    """Each (finding, host) with the step and probe whose output backs it."""
    rows = fetch_rows(con, f"""
        SELECT session_id, step_seq, host, probe, code, severity, evidence
        FROM findings WHERE session_id IN ({sql_list(sessions)}) AND host IS NOT NULL
          AND severity <> 'info'
        ORDER BY session_id, step_seq, finding_no, host""")
    for row in rows:
        row["evidence"] = json.loads(row["evidence"]) if row["evidence"] else {}
    return rows


def _versions(con: Connection, sessions: list[str], hosts: list[str],
              ids: dict[str, Any]) -> dict[str, Any]:
    """Per host: the versions probe's latest facts (or null: no walk ran it), and the driver
    version and GPU serials / UUIDs with their sources (``bundle_facts.identity``)."""
    rows = con.execute(f"""
        SELECT host, arg_max(facts, (ts, step_seq)) FROM probe_runs
        WHERE session_id IN ({sql_list(sessions)}) AND host IN ({sql_list(hosts)})
          AND probe = 'versions' AND state = 'ok' GROUP BY host ORDER BY host""").fetchall()
    probed: dict[str, Any] = {str(h): json.loads(f) if f else {} for h, f in rows}
    return {host: {"versions_probe": probed.get(host), **ids.get(host, {})} for host in hosts}


def _kernel_files(outputs: list[RawOutput], hosts: list[str],
                  names: Names) -> list[tuple[str, str, str]]:
    files = []
    for host in hosts:
        seen: dict[str, None] = {}
        for out in outputs:
            if out.host == host:
                for line in out.text.splitlines():
                    if KERNEL_LINE.search(line):
                        seen.setdefault(line.rstrip(), None)
        if seen:
            files.append((f"kernel/{names.component(host)}.txt",
                          f"XID and link kernel lines of {host}",
                          "\n".join(seen) + "\n"))
    return files


def _gpu_files(outputs: list[RawOutput], evidence: list[dict[str, Any]],
               names: Names) -> list[tuple[str, str, str]]:
    """nvidia-smi -q of each GPU a GPU finding names (its PCI bus in the evidence)."""
    accused: dict[tuple[str, str], None] = {}
    for e in evidence:
        if e["code"].startswith(_GPU_CODES):
            for value in leaves(e["evidence"]):
                label = _GPU_LABEL.match(str(value))
                bus = _bus_of_index(outputs, e["host"], label.group(1)) if label \
                    else _bus_key(str(value))
                if bus:
                    accused.setdefault((e["host"], bus), None)
    files = []
    for host, bus in accused:
        for out in reversed(outputs):  # the latest gpu output of the host that has it
            smi = _section(out.text, "remap") if out.host == host and out.probe == "gpu" \
                else None
            block = gpu_block(smi, bus) if smi else None
            if block:
                files.append((f"gpus/{names.component(host)}-{bus.replace(':', '')}.txt",
                              f"nvidia-smi -q of the GPU at {bus} on {host}", block))
                break
    return files


def _bus_of_index(outputs: list[RawOutput], host: str, index: str) -> str | None:
    """The bus of GPU *index* on *host*, from the gpu probe's nvidia-smi query rows."""
    for out in reversed(outputs):
        query = _section(out.text, "query") if out.host == host and out.probe == "gpu" \
            else None
        for m in _QUERY_ROW.finditer(query or ""):
            if m.group(1) == index:
                return _bus_key(m.group(2))
    return None


def _raw_files(outputs: list[RawOutput], evidence: list[dict[str, Any]],
               names: Names) -> list[tuple[str, str, str, str]]:
    """The outputs that back findings, worst finding first."""
    worst: dict[tuple[str, int, str, str], tuple[int, list[str]]] = {}
    for e in evidence:
        key = (e["session_id"], e["step_seq"], e["host"], e["probe"])
        rank, codes = worst.get(key, (9, []))
        worst[key] = (min(rank, _RANK.get(e["severity"], 3)), sorted({*codes, e["code"]}))
    by_key = {(o.session, o.step_seq, o.host, o.probe): o for o in outputs}
    from probes.catalog import load_catalog

    blind = set(load_catalog().category("not-evidence"))  # "could not look": no evidence
    files: list[tuple[str, str, str, str]] = []
    seen: dict[tuple[str, str, str], int] = {}  # the same output of a host in several walks
    for key, (_rank, codes) in sorted(worst.items(), key=lambda kv: (kv[1][0], kv[0])):
        out = by_key.get(key)
        if out is None or not set(codes) - blind:
            continue
        again = seen.get((out.host, out.probe, out.text))
        if again is not None:  # one file, naming every walk that printed it
            where, what, text, probe = files[again]
            files[again] = (where, f"{what}; the same output in session {out.session}",
                            text, probe)
            continue
        cut = f" (cut from {out.raw_bytes} bytes)" if out.raw_bytes > len(out.text) else ""
        where = (f"raw/{names.component(out.host)}/{names.component(out.probe)}-"
                 f"{names.component(out.session)}-{out.step_seq}.txt")
        seen[(out.host, out.probe, out.text)] = len(files)
        files.append((where,
                      f"{out.probe} output of {out.host} behind {', '.join(codes)}{cut}",
                      out.text, out.probe))
    return files


def _member(prefix: str, name: str) -> str:
    """``prefix/name`` as a tar member, or ValueError when it would land anywhere but in the
    bundle's directory: absolute, climbing, empty or dot components, a backslash (a
    separator to Windows tools), control characters."""
    path = f"{prefix}/{name}"
    parts = path.split("/")
    if path.startswith("/") or any(p in ("", ".", "..") for p in parts) or "\\" in path \
            or not path.isprintable():
        raise ValueError(f"refused a bundle member outside its directory: {path!r}")
    return path


def _tar_gz(prefix: str, blobs: dict[str, bytes], stamp: Any) -> bytes:
    """A tar.gz whose bytes depend only on *blobs* and *stamp*: regular files only, each
    inside *prefix* (``_member``)."""
    mtime = int(stamp.replace(tzinfo=timezone.utc).timestamp()) \
        if isinstance(stamp, datetime) else 0
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for name in sorted(blobs):
            info = tarfile.TarInfo(_member(prefix, name))
            info.type = tarfile.REGTYPE  # never a link, a device or a directory
            info.size, info.mtime, info.mode = len(blobs[name]), mtime, 0o644
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            tar.addfile(info, io.BytesIO(blobs[name]))
    packed = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=packed, mtime=0, compresslevel=9) as gz:
        gz.write(raw.getvalue())
    return packed.getvalue()
