"""Kernel SNMP/netstat counters under their MIB names, shared by ``netstat -s`` and ``nstat``.

``nstat`` prints the kernel's own names (``TcpRetransSegs``); ``netstat -s`` prints English
sentences for the same counters ("1402 segments retransmitted"). Both parsers report
``counters`` keyed by the nstat name so checks are written once, whichever tool a host had.
"""

from __future__ import annotations

from typing import Any

# netstat -s sentence (after the number) -> MIB name, per section. Several spellings are the
# ones old net-tools printed ("retransmited", "send out", "connections openings").
SENTENCES: dict[str, dict[str, str]] = {
    "Tcp": {
        "active connection openings": "TcpActiveOpens",
        "active connections openings": "TcpActiveOpens",
        "passive connection openings": "TcpPassiveOpens",
        "failed connection attempts": "TcpAttemptFails",
        "connection resets received": "TcpEstabResets",
        "connections established": "TcpCurrEstab",
        "segments received": "TcpInSegs",
        "segments sent out": "TcpOutSegs",
        "segments send out": "TcpOutSegs",
        "segments retransmitted": "TcpRetransSegs",
        "segments retransmited": "TcpRetransSegs",
        "bad segments received": "TcpInErrs",
        "bad segments received.": "TcpInErrs",
        "resets sent": "TcpOutRsts",
    },
    "Udp": {
        "packets received": "UdpInDatagrams",
        "packets to unknown port received": "UdpNoPorts",
        "packets to unknown port received.": "UdpNoPorts",
        "packet receive errors": "UdpInErrors",
        "packets sent": "UdpOutDatagrams",
        "receive buffer errors": "UdpRcvbufErrors",
        "send buffer errors": "UdpSndbufErrors",
    },
    "TcpExt": {
        "fast retransmits": "TcpExtTCPFastRetrans",
        "retransmits in slow start": "TcpExtTCPSlowStartRetrans",
        "other TCP timeouts": "TcpExtTCPTimeouts",
        "packets pruned from receive queue because of socket buffer overrun": ("TcpExtPruneCalled"),
        "packets collapsed in receive queue due to low socket buffer": "TcpExtTCPRcvCollapsed",
        "delayed acks sent": "TcpExtDelayedACKs",
        "connections reset due to unexpected data": "TcpExtTCPAbortOnData",
        "connections reset due to early user close": "TcpExtTCPAbortOnClose",
        "connections aborted due to timeout": "TcpExtTCPAbortOnTimeout",
        "SYNs to LISTEN sockets dropped": "TcpExtListenDrops",
        "SYNs to LISTEN sockets ignored": "TcpExtListenDrops",
        "times the listen queue of a socket overflowed": "TcpExtListenOverflows",
    },
}

# The facts every check wants, named once.
SUMMARY_KEYS: dict[str, str] = {
    "tcp_retransmitted_segments": "TcpRetransSegs",
    "tcp_out_segments": "TcpOutSegs",
    "tcp_in_segments": "TcpInSegs",
    "tcp_in_errors": "TcpInErrs",
    "tcp_out_resets": "TcpOutRsts",
    "tcp_fast_retransmits": "TcpExtTCPFastRetrans",
    "tcp_timeouts": "TcpExtTCPTimeouts",
    "tcp_lost_retransmits": "TcpExtTCPLostRetransmit",
}


def summary(counters: dict[str, int]) -> dict[str, Any]:
    """Contract keys from MIB-named counters; an absent counter stays None, never 0."""
    return {key: counters.get(name) for key, name in SUMMARY_KEYS.items()}
