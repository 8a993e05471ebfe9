"""``netstat -s`` (``-st``): protocol statistics as English sentences.

TCP retransmissions are the host-side symptom of a lossy or congested network. Sentences are
mapped to the kernel's MIB names (see ``_snmp``); "Name: value" lines, which netstat prints for
TcpExt/IpExt counters it has no sentence for, are named "<Section><Name>" as nstat does.
"""

from __future__ import annotations

import re
from typing import Any

from ._common import fail, strip_prefix, text_lines
from ._snmp import SENTENCES, summary

WHAT = "netstat -s"

_SECTION = re.compile(r"^([A-Z][A-Za-z0-9]*):\s*$")
_SENTENCE = re.compile(r"^\s+(\d+)\s+(\S.*)$")
_NAMED = re.compile(r"^\s+([A-Za-z][A-Za-z0-9]*):\s*(\d+)\s*$")
_KNOWN_SECTIONS = {"Ip", "Icmp", "IcmpMsg", "Tcp", "Udp", "UdpLite", "TcpExt", "IpExt", "MPTcpExt"}


def parse(text: str) -> dict[str, Any]:
    """MIB-named counters plus the unmapped sentences, per section."""
    section: str | None = None
    sections: list[str] = []
    counters: dict[str, int] = {}
    other: dict[str, dict[str, int]] = {}
    for raw in text_lines(text):
        line = strip_prefix(raw).rstrip()
        if m := _SECTION.match(line):
            section = m.group(1)
            sections.append(section)
            continue
        if section is None:
            continue
        if m := _NAMED.match(line):
            counters.setdefault(section + m.group(1), int(m.group(2)))
        elif m := _SENTENCE.match(line):
            sentence = m.group(2).strip()
            name = SENTENCES.get(section, {}).get(sentence)
            if name:
                counters.setdefault(name, int(m.group(1)))
            else:
                other.setdefault(section, {})[sentence] = int(m.group(1))
    if not _KNOWN_SECTIONS.intersection(sections):
        fail(WHAT, "no 'Tcp:', 'Ip:', 'Udp:' or other protocol section header found")
    return {**summary(counters), "counters": counters, "sentences": other}
