"""kernel: the kernel log lines the fault catalogue's kernel signatures could want, with their age.

Hung tasks, soft and hard lockups, machine checks, EDAC memory errors, PCIe AER, NIC firmware
timeouts, NVMe and block I/O errors, filesystems gone read-only, Lustre evictions and NFS
servers not responding all show first (often only) in the kernel log. The host greps it with
the union of the catalogue's kernel patterns (``probes.faults.stream_ere("kernel")``), so only
matching lines leave the node, the last ``MAX_LINES`` of them, each cut to 500 characters.

The log is read with ``dmesg`` (its ``[seconds since boot]`` stamps give every line an age
against ``/proc/uptime``), else with ``journalctl -k -b -o short-monotonic`` (the same stamps).
A kernel log that cannot be read (``kernel.dmesg_restrict`` for a non-root user, no permission
on the journal, no journal) is *not measured*: it is never an empty, healthy log. journalctl is
asked without ``-q`` first, because ``-q`` hides the very notice ("insufficient permissions",
"not seeing messages from other users") that tells an unreadable journal from a quiet one.

What the facts mean:

- ``source``: ``dmesg`` or ``journalctl``; None when neither could be read;
- ``readable``: whether a kernel log was read (None when the section is missing);
- ``uptime_s``: seconds since boot when the log was read;
- ``lines``: the matching lines, oldest first: ``{age_s, text}``; ``age_s`` is
  ``uptime_s - stamp`` (None when the line has no seconds-since-boot stamp, e.g. ``dmesg -T``),
  ``text`` the message without its stamp and ``host kernel:`` prefix;
- ``line_count``, ``truncated``: how many lines came back, and whether the cap was reached
  (older matching lines were dropped on the host);
- ``storage_waiting``: whether the log shows a network filesystem's servers not answering
  this host now (a fabric-scope storage signature of the catalogue, an NFS server not
  responding, a Lustre target lost, a CephFS MDS hung, an RBD volume failing, with no line
  after it saying it answered again): the tasks blocked on it are that outage's symptom
  (``kernel-hung-task``'s ``unless``), not a fault of the host;
- ``nvmeof_lost_errors_only``: every block and filesystem error line names a remote NVMe
  namespace that lost all its paths before it (probes/storage_paths.py): the storage's
  symptom (the ``unless`` of kernel-block-io-error, kernel-fs-readonly, kernel-fs-corruption);
- ``edac_mc_count``, ``edac_ue_count``, ``edac_ce_count``: the EDAC memory controllers and the
  uncorrected / corrected errors they counted since the driver loaded (sysfs
  ``/sys/devices/system/edac/mc/mc*/ue_count``, ``ce_count``; Documentation/admin-guide/
  ras.rst): what the kernel log may no longer hold once its ring buffer wrapped. None when
  the host has no EDAC driver (a VM, an unsupported memory controller): not measured.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from typing import Any

from probes import faults
from probes.base import (
    Context,
    Probe,
    default_thresholds,
    guard_parse,
    not_measured,
    script,
    split_sections,
)
from probes.model import Finding
from probes.parsers import ParseError
from probes.parsers.kernel_log import split_line
from probes.storage_paths import lost_errors_only

NAME = "kernel"
SECTION = "kernel"
MAX_LINES = 400
LINE_CHARS = 500
# What journalctl prints instead of entries when the user may not read the system journal
# (systemd src/journal/journalctl.c: access_check / "Hint: You are currently not seeing ...").
_NO_ACCESS = re.compile(r"insufficient permissions|not seeing messages|No journal files were "
                        r"(?:opened|found)|Permission denied|Failed to ", re.I)


def command_text(ere: str) -> str:
    """The section's shell: uptime, which source was readable, then the matching lines."""
    grep = (f"grep -aE -e {shlex.quote(ere)} | tail -n {MAX_LINES} | cut -c1-{LINE_CHARS}")
    return (
        "echo \"uptime $(cut -d' ' -f1 /proc/uptime 2>/dev/null)\"; "
        # dmesg's stderr alone (its stdout thrown away): the reason when it may not read.
        "if derr=$(timeout 10 dmesg 2>&1 >/dev/null); then echo 'source dmesg'; "
        f"timeout 10 dmesg 2>/dev/null | {grep}; "
        "else echo \"dmesg_error $(printf '%s' \"$derr\" | head -n 1 | cut -c1-200)\"; "
        "if command -v journalctl >/dev/null 2>&1; then "
        "jout=$(timeout 10 journalctl -k -b --no-pager -n 1 -o short-monotonic 2>&1); jrc=$?; "
        "if [ $jrc -eq 0 ] && printf '%s\\n' \"$jout\" | grep -q '^\\[' && "
        "! printf '%s\\n' \"$jout\" | grep -qiE "
        "'insufficient permissions|not seeing messages|No journal files'; then "
        "echo 'source journalctl'; "
        f"timeout 10 journalctl -k -b -q --no-pager -o short-monotonic 2>/dev/null | {grep}; "
        "else echo 'source none'; "
        "printf '%s\\n' \"$jout\" | grep -v -e '^\\[' -e '^-- ' | head -n 3 | cut -c1-200 | "
        "sed 's/^/journal_error /'; false; fi; "
        "else echo 'source none'; echo 'journal_error journalctl not installed'; false; fi; fi"
    )


# Each EDAC memory controller's counters (drivers/edac/edac_mc_sysfs.c: ue_count, ce_count,
# since the driver loaded or the last reset_counters); "no edac" where no driver registered.
EDAC = "edac"
EDAC_TEXT = (
    "if [ -d /sys/devices/system/edac/mc ]; then "
    "for d in /sys/devices/system/edac/mc/mc[0-9]*; do [ -r \"$d/ue_count\" ] || continue; "
    "echo \"mc ${d##*/} $(cat \"$d/ue_count\" 2>/dev/null) $(cat \"$d/ce_count\" 2>/dev/null)\"; "
    "done; echo 'edac read'; else echo 'no edac'; fi")


def command(params: Mapping[str, Any]) -> str:
    return script([(SECTION, command_text(faults.stream_ere("kernel"))), (EDAC, EDAC_TEXT)])


_UPTIME = re.compile(r"^uptime (\d+(?:\.\d+)?)\s*$")
_SOURCE = re.compile(r"^source (\S+)\s*$")
_ERROR = re.compile(r"^(dmesg_error|journal_error) ?(.*)$")


def _parse(text: str) -> dict[str, Any]:
    sections = split_sections(text)
    facts: dict[str, Any] = {"source": None, "readable": None, "uptime_s": None, "lines": [],
                             "line_count": None, "truncated": None, "missing": [], "errors": {},
                             "edac_mc_count": None, "edac_ue_count": None,
                             "edac_ce_count": None}
    sec = sections.get(SECTION)
    if sec is None:
        raise ParseError("kernel: no kernel section (not the output of the kernel probe)")
    _edac(sections.get(EDAC), facts)
    if sec.missing:
        facts["missing"].append(SECTION)
        return facts
    reasons: list[str] = []
    body: list[str] = []
    source_seen = False
    for raw in sec.text.splitlines():
        if not source_seen:  # the header lines come before the source line
            if m := _UPTIME.match(raw):
                facts["uptime_s"] = float(m.group(1))
                continue
            if m := _ERROR.match(raw):
                reasons.append(_reason(m.group(1), m.group(2)))
                continue
            if m := _SOURCE.match(raw):
                source_seen = True
                facts["source"] = None if m.group(1) == "none" else m.group(1)
                continue
        elif facts["source"] is None:
            if m := _ERROR.match(raw):
                reasons.append(_reason(m.group(1), m.group(2)))
            continue
        if raw.strip():
            body.append(raw)
    if not source_seen:
        facts["readable"] = False
        facts["errors"][SECTION] = (sec.text.strip().splitlines() or
                                    [f"exit status {sec.rc}"])[0][:200]
        return facts
    if facts["source"] is None or _journal_refused(facts["source"], body):
        facts["source"] = None
        facts["readable"] = False
        facts["errors"][SECTION] = "; ".join(reasons) or "neither dmesg nor the kernel " \
            "journal could be read"
        return facts
    facts["readable"] = True
    uptime = facts["uptime_s"]
    for raw in body:
        stamp, _, message, _ = split_line(raw)
        age = None
        if stamp is not None and uptime is not None:
            age = round(max(0.0, uptime - stamp), 1)
        facts["lines"].append({"age_s": age, "text": message[:LINE_CHARS]})
    facts["line_count"] = len(facts["lines"])
    facts["truncated"] = len(facts["lines"]) >= MAX_LINES
    facts["storage_waiting"] = storage_waiting(facts["lines"])
    facts["nvmeof_lost_errors_only"] = lost_errors_only(
        facts["lines"], float(default_thresholds().get("fault_log_window_minutes", 120)))
    return facts


STORAGE_FAMILY = "storage-mounts"


def storage_waiting(lines: list[dict[str, Any]]) -> bool:
    """Whether *lines* raise a storage server's outage now: a kernel-log signature of the
    storage family whose scope is the fabric (the servers, not this host), by the
    catalogue's own rule (pattern, window, resolved_by)."""
    from probes.faults.apply import _log_hits

    window = float(default_thresholds().get("fault_log_window_minutes", 120))
    for sig in faults.load_faults().for_stream("kernel"):
        if sig.family == STORAGE_FAMILY and sig.scope == "fabric" and sig.log and \
                len(_log_hits(sig, lines, window)) >= sig.log.min_count:
            return True
    return False


_MC = re.compile(r"^mc (mc\d+) (\d+) (\d+)\s*$")


def _edac(sec: Any, facts: dict[str, Any]) -> None:
    """The EDAC counters, summed over the memory controllers; left None (not measured) when the
    section is absent (an older recording), failed, or found no EDAC driver."""
    if sec is None or sec.missing:
        return
    lines = sec.text.splitlines()
    counts = [m for line in lines if (m := _MC.match(line.strip()))]
    if "edac read" not in (line.strip() for line in lines) or not counts:
        return
    facts["edac_mc_count"] = len(counts)
    facts["edac_ue_count"] = sum(int(m.group(2)) for m in counts)
    facts["edac_ce_count"] = sum(int(m.group(3)) for m in counts)


def _reason(kind: str, text: str) -> str:
    """'dmesg: ...' / 'journalctl: ...', without repeating a tool name the text starts with."""
    tool = "dmesg" if kind == "dmesg_error" else "journalctl"
    text = text.strip() or "failed"
    return (text if text.startswith(tool) else f"{tool}: {text}")[:200]


def _journal_refused(source: str, body: list[str]) -> bool:
    """A journal that printed its access notice in place of entries was not read."""
    return source == "journalctl" and any(_NO_ACCESS.search(line) for line in body[:3]) and \
        not any(line.lstrip().startswith("[") for line in body[:3])


parse = guard_parse(NAME, _parse)


def check(host: str, facts: dict[str, Any], ctx: Context) -> list[Finding]:
    if SECTION in facts.get("missing", []):
        return [not_measured(NAME, host, "kernel log", "the kernel section did not run")]
    if facts.get("readable") is False:
        return [not_measured(NAME, host, "kernel log",
                             facts.get("errors", {}).get(SECTION) or "not readable")]
    return []


PROBE = Probe(NAME, command, parse, check, timeout_s=30.0)
