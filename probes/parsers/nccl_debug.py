"""NCCL_DEBUG=INFO logs and PyTorch ProcessGroupNCCL watchdog messages.

Answers the first questions of a hang or slow-job triage: which NCCL version, which network
(IB or the Socket fallback), which HCAs and transports, which NCCL_* overrides, and which
collective timed out at which sequence number. Logs arrive interleaved with framework output
and behind launcher prefixes, so each fact is matched anywhere in a line.
"""

from __future__ import annotations

import re
from typing import Any

from ._common import fail, strip_prefix, text_lines, to_int

WHAT = "NCCL debug / ProcessGroupNCCL"

_SIGNATURE = re.compile(
    r"NCCL (?:INFO|WARN|TRACE)\b|WorkNCCL\(|ProcessGroupNCCL|ncclCommWatchdog|NCCL error"
)
_VERSION_ONLY = re.compile(r"\bNCCL version \d+\.")
_NCCL_TESTS = re.compile(r"^#\s*(?:nThread\s|Avg bus bandwidth)", re.MULTILINE)
_VERSION = re.compile(r"NCCL version\s+(\d+\.\d+\.\d+)(\S*)")
_USING_NETWORK = re.compile(r"\bUsing network\s+(\S.*)$")
_NET_USING = re.compile(r"\bNET/(\w+)\s*:\s*Using\b")
_IB_DEVICE = re.compile(r"\[(\d+)\]([\w.\-]+):(\d+)/(\w+)")
_VIA = re.compile(r"\bvia\s+((?:P2P|SHM|NET|NVLS|COLLNET|CollNet)\b\S*)")
_ENV = re.compile(r"\b(NCCL_\w+) set by environment to(.*)$")
_WARN = re.compile(r"\bNCCL WARN\s+(.*)$")
_NRANKS = re.compile(r"\bnranks\s+(\d+)")
_TIMEOUT = re.compile(r"collective operation timeout:\s*WorkNCCL\(", re.IGNORECASE)
_SEQ = re.compile(r"\bSeqNum=(\d+)")
_OP = re.compile(r"\bOpType=(\w+)")
_TIMEOUT_MS = re.compile(r"\bTimeout\(ms\)=(\d+)")
_RAN_FOR = re.compile(r"\bran for\s+(\d+)\s+milliseconds")
_NUMEL_IN = re.compile(r"\bNumelIn=(\d+)")
_NUMEL_OUT = re.compile(r"\bNumelOut=(\d+)")
_RANK = re.compile(r"\[(?:PG [^\]]*?)?Rank (\d+)\]")


def _transport(via: str) -> str:
    """ "NET/IB/1(0)/GDRDMA" -> "NET/IB/GDRDMA": drop device indices, keep the path kind."""
    parts = [p for p in via.split("/") if p and not re.match(r"^\d+(?:\(\d+\))?$", p)]
    return "/".join(parts)


def _timeout(line: str) -> dict[str, Any]:
    work = line[_TIMEOUT.search(line).start() :]  # type: ignore[union-attr]
    ranks = _RANK.findall(line[: len(line) - len(work)])

    def grab(pattern: re.Pattern[str], where: str = work) -> str | None:
        m = pattern.search(where)
        return m.group(1) if m else None

    return {
        "op": grab(_OP),
        "seq": to_int(grab(_SEQ)),
        "timeout_ms": to_int(grab(_TIMEOUT_MS)),
        "ran_for_ms": to_int(grab(_RAN_FOR)),
        "numel_in": to_int(grab(_NUMEL_IN)),
        "numel_out": to_int(grab(_NUMEL_OUT)),
        "rank": int(ranks[-1]) if ranks else None,
    }


def parse(text: str) -> dict[str, Any]:
    """Versions, networks, devices, transports, env overrides, warnings and timeouts."""
    if not _SIGNATURE.search(text):
        if not _VERSION_ONLY.search(text):
            fail(WHAT, "no 'NCCL INFO/WARN', 'NCCL version' or ProcessGroupNCCL line found")
        if _NCCL_TESTS.search(text):
            fail(WHAT, "nccl-tests output whose only NCCL log line is the version banner")
    version = version_full = None
    networks: list[str] = []
    ib_devices: list[dict[str, Any]] = []
    transports: list[str] = []
    env: dict[str, str] = {}
    warnings: list[str] = []
    timeouts: list[dict[str, Any]] = []
    nranks: int | None = None
    for raw in text_lines(text):
        line = strip_prefix(raw)
        if version is None and (m := _VERSION.search(line)):
            version, version_full = m.group(1), m.group(1) + m.group(2)
        for m in (_NET_USING.search(line), _USING_NETWORK.search(line)):
            name = m.group(1).strip() if m else "Plugin"
            if name != "Plugin" and name not in networks:
                networks.append(name)
        if _NET_USING.search(line):
            for index, name, port, layer in _IB_DEVICE.findall(line):
                entry = {"index": int(index), "name": name, "port": int(port), "type": layer}
                if entry not in ib_devices:
                    ib_devices.append(entry)
        for via in _VIA.findall(line):
            kind = _transport(via)
            if kind and kind not in transports:
                transports.append(kind)
        if m := _ENV.search(line):
            env.setdefault(m.group(1), m.group(2).strip().removesuffix(".").strip())
        if m := _WARN.search(line):
            warnings.append(m.group(1).strip())
        if m := _NRANKS.search(line):
            nranks = max(nranks or 0, int(m.group(1)))
        if _TIMEOUT.search(line):
            timeouts.append(_timeout(line))
    return {
        "nccl_version": version,
        "nccl_version_full": version_full,
        "networks": networks,
        "ib_devices": ib_devices,
        "transports": transports,
        "env": env,
        "warnings": warnings,
        "nranks": nranks,
        "watchdog_timeouts": timeouts,
    }
