"""What a vendor asks for first, taken for the bundle from every source an incident holds:
each host's driver version and each GPU board's serial and UUID (the RMA key), and the
command line that produced each raw output.

A GPU that fell off the bus answers no ``nvidia-smi``: its serial is only where an earlier
probe of the walk printed it, and the driver version is in the kernel log's NVRM load line
and ``/proc/driver/nvidia/version``, in any nvidia-smi header, and in the sweep's facts. So
every stored output and every parsed fact of the incident's walks is read, and each value is
listed with where it was found (as ``sos`` and ``nvidia-bug-report.sh`` name their sources).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from typing import Any

from .base import Connection, sql_list
from .raw import RawOutput

# The NVIDIA kernel module's version as it loads (dmesg) and in /proc/driver/nvidia/version:
#   NVRM: loading NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 ...
#   NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  525.60.11  Release Build ...
_NVRM = re.compile(r"NVRM(?: version)?:[^\n]*?Kernel Module(?: for \S+)?\s+(\d{3}\.\d+(?:\.\d+)?)")
# nvidia-smi's table header (| ... Driver Version: 550.54.15 ...) and -q (Driver Version : ...);
# not "CUDA Driver Version" (a CUDA version, two digits or none before the dot)
_SMI_DRIVER = re.compile(r"(?<!CUDA )Driver Version\s*:\s*(\d{3}\.\d+(?:\.\d+)?)")
_SERIAL = re.compile(r"^\s*Serial Number\s*:\s*(\S+)\s*$", re.MULTILINE)
_UUID = re.compile(r"\bGPU-[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-"
                   r"[0-9a-fA-F]{12}\b")
_NONE = {"n/a", "[n/a]", "none", "unknown", "0", ""}
_SECTION = re.compile(r"echo '=== diag:section (\S+)'; \{ (.*?) ; \} 2>&1; echo", re.DOTALL)


def _where(out: RawOutput) -> str:
    return f"{out.probe} output (session {out.session}, step {out.step_seq})"


def _walk(value: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _walk(item, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _walk(item, f"{path}[{i}]")
    else:
        yield path, value


def identity(con: Connection, sessions: Sequence[str], hosts: Sequence[str],
             outputs: Sequence[RawOutput]) -> dict[str, Any]:
    """Per host: ``driver_version`` and ``gpu_serials`` / ``gpu_uuids``, each value with the
    sources that printed it; ``{}`` for a host none of them names."""
    found: dict[str, dict[str, dict[str, list[str]]]] = {}

    def note(host: str, what: str, value: str, source: str) -> None:
        if value.strip().lower() in _NONE:
            return
        sources = found.setdefault(host, {}).setdefault(what, {}).setdefault(value, [])
        if source not in sources:
            sources.append(source)

    wanted = set(hosts)
    for out in outputs:
        if out.host not in wanted:
            continue
        for m in _NVRM.finditer(out.text):
            note(out.host, "driver_version", m.group(1),
                 f"NVRM line (kernel log or /proc/driver/nvidia/version), {_where(out)}")
        for m in _SMI_DRIVER.finditer(out.text):
            note(out.host, "driver_version", m.group(1), f"nvidia-smi header, {_where(out)}")
        for m in _SERIAL.finditer(out.text):
            note(out.host, "gpu_serials", m.group(1), f"nvidia-smi -q, {_where(out)}")
        for m in _UUID.finditer(out.text):
            note(out.host, "gpu_uuids", m.group(0), f"nvidia-smi, {_where(out)}")
    if sessions and hosts:
        for host, probe, facts, session, seq in con.execute(f"""
                SELECT host, probe, facts, session_id, step_seq FROM probe_runs
                WHERE session_id IN ({sql_list(list(sessions))})
                  AND host IN ({sql_list(list(hosts))})
                  AND state = 'ok' AND facts IS NOT NULL
                  AND (facts LIKE '%driver%' OR facts LIKE '%serial%' OR facts LIKE '%uuid%')
                ORDER BY session_id, step_seq, probe""").fetchall():
            try:
                data = json.loads(facts)
            except ValueError:
                continue
            where = f"{probe} facts (session {session}, step {seq})"
            for path, value in _walk(data):
                leaf = path.rsplit(".", 1)[-1].split("[")[0].lower()
                if not isinstance(value, str | int) or isinstance(value, bool):
                    continue
                if leaf in ("driver_version", "module_loaded") and re.fullmatch(
                        r"\d{3}\.\d+(?:\.\d+)?", str(value)):
                    note(host, "driver_version", str(value), f"{where}: {path}")
                elif "serial" in leaf:
                    note(host, "gpu_serials", str(value), f"{where}: {path}")
                elif "uuid" in leaf and _UUID.fullmatch(str(value)):
                    note(host, "gpu_uuids", str(value), f"{where}: {path}")
    return {host: {what: [{"value": v, "sources": s} for v, s in values.items()]
                   for what, values in sorted(found.get(host, {}).items())}
            for host in hosts}


def probe_commands(probe: str) -> list[dict[str, str]]:
    """The command line of each section of *probe*'s script, as this diag builds it with its
    default parameters (the section names frame the raw output: ``=== diag:section NAME``)."""
    from probes.base import get_probe

    try:
        script = get_probe(probe).command({})
    except Exception:  # a probe that needs parameters, or unknown to this diag
        return []
    if not script:
        return []
    return [{"section": m.group(1), "command": " ".join(m.group(2).split())}
            for m in _SECTION.finditer(script)]


def readme(incident_id: str, inc: dict[str, Any], as_of: str, version: str,
            ids: dict[str, Any], files: list[tuple[str, str, str]]) -> str:
    """The bundle's README: the incident, each host's driver and boards, every file."""
    lines = [f"diag bundle of incident {incident_id}", "",
             f"Title:      {inc['title']}", f"Status:     {inc['status']}",
             f"Root cause: {inc.get('root_cause') or '-'}",
             f"As of:      {as_of} (the incident's last change; UTC)",
             f"Made by:    diag {version}".rstrip(), "",
             "Assembled from diag's incident store: no host was contacted to make it. Every",
             "file was redacted when recorded and again when bundled ([REDACTED]).",
             "manifest.json lists each file's size and SHA-256, and what was left out.", "",
             "Driver version and GPU boards of the hosts with findings (every source in",
             "versions.json):"]
    for host, found in ids.items():
        driver = ", ".join(d["value"] for d in found.get("driver_version", [])) or "not found"
        serials = ", ".join(d["value"] for d in found.get("gpu_serials", [])) or "not found"
        lines += [f"  {host}: driver {driver}; GPU serials {serials}"]
    if not ids:
        lines.append("  (no host with findings)")
    lines += ["", "Files (commands.json: the command line behind each raw/ file):"]
    lines += [f"  {name}: {what}" for name, what, _ in files]
    return "\n".join(lines) + "\n"
