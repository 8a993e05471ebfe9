"""RDMA NIC ``hw_counters`` (``/sys/class/infiniband/<dev>/ports/<n>/hw_counters/*``) as a listing.

These are the driver's own counters next to the IBA PortCounters: retransmission and loss
evidence (``out_of_sequence``, ``packet_seq_err``, ``local_ack_timeout_err``,
``rnr_nak_retry_err``, ``implied_nak_seq_err``, ``duplicate_request``) and, on RoCE, the
congestion-control counters (``np_cnp_sent``, ``rp_cnp_handled``, ``np_ecn_marked_roce_packets``).
The set of files differs by driver (mlx5, bnxt_re, irdma, efa) and by firmware, so names are
taken as they come, never from a fixed list.

Two listing shapes are accepted, as the contract says:

- ``grep . /sys/class/infiniband/*/ports/*/hw_counters/*`` (or ``grep -H``): ``<path>:<value>``;
  ``device`` and ``port`` come from the path, one entry per device/port in order of appearance
  (device-level ``/sys/class/infiniband/<dev>/hw_counters/*`` files give ``port`` null);
- a loop inside one ``hw_counters`` directory (``echo -n "$f:"; cat $f``): bare ``name:value``
  lines, one entry with ``device`` and ``port`` null.

A value that is not an integer (``N/A (no PMA)``, an empty read) is left out, never 0. Files of
the IBA ``counters`` directory next to it are not hw_counters and are skipped when a path says so.
"""

from __future__ import annotations

import re
import sys
from typing import Any

from ._common import fail, strip_prefix, text_lines

WHAT = "RDMA hw_counters listing"

_PATH = re.compile(r"^\s*(?P<path>(?:\S*?/)?(?P<dir>hw_counters|counters)/(?P<name>[\w.-]+))"
                   r"\s*:\s?(?P<value>.*)$")
_PORT = re.compile(r"/infiniband/(?P<device>[^/\s]+)/(?:ports/(?P<port>\d+)/)?(?:hw_)?counters/")
_BARE = re.compile(r"^\s*(?P<name>[A-Za-z_][\w.-]*)\s*:\s?(?P<value>.*)$")
_INT = re.compile(r"^\s*(\d+)\s*$")
# hw_counters file names of the common RDMA drivers (mlx5, mlx4, bnxt_re, irdma, efa); a bare
# name:value listing must name at least one, so that ethtool -S, ibstat or nvidia-smi -q
# "Key: 4" lines are not taken for one.
_KNOWN = frozenset({
    "duplicate_request", "implied_nak_seq_err", "lifespan", "local_ack_timeout_err",
    "np_cnp_sent", "np_ecn_marked_roce_packets", "out_of_buffer", "out_of_sequence",
    "packet_seq_err", "req_cqe_error", "req_cqe_flush_error", "req_remote_access_errors",
    "req_remote_invalid_request", "resp_cqe_error", "resp_cqe_flush_error",
    "resp_local_length_error", "resp_remote_access_errors", "rnr_nak_retry_err",
    "roce_adp_retrans", "roce_adp_retrans_to", "roce_slow_restart", "roce_slow_restart_cnps",
    "roce_slow_restart_trans", "rp_cnp_handled", "rp_cnp_ignored", "rx_atomic_requests",
    "rx_dct_connect", "rx_icrc_encapsulated", "rx_read_requests", "rx_write_requests",
    "rx_roce_only_pkts", "tx_roce_pkts", "rx_roce_pkts", "to_retransmits", "seq_err_naks_rcvd",
    "rnr_naks_rcvd", "missing_resp", "dup_req", "res_oos_drop_count", "rx_cnp_pkts",
    "tx_cnp_pkts", "cnpSent", "cnpHandled", "RxECNMrkd", "ip4InReceives", "RxVlanErrors",
    # mlx4 (main.c diag_basic/diag_ext), bnxt_re (hw_counters.c), efa (efa_verbs.c)
    "sq_num_to", "sq_num_oos", "rq_num_oos", "rq_num_dup", "sq_num_rnr", "oos_drop_count",
    "max_retry_exceeded", "retrans_pkts", "retrans_timeout_events",
    "rdma_read_resp_bytes", "rx_drops", "unresponsive_remote_events",
})
_NA = re.compile(r"^\s*(?:N/A\b.*|\[N/A\]|-)?\s*$", re.IGNORECASE)


def _entry(ports: list[dict[str, Any]], index: dict[tuple[Any, Any], dict[str, Any]],
           device: str | None, port: int | None) -> dict[str, Any]:
    key = (device, port)
    if key not in index:
        index[key] = {"device": device, "port": port, "counters": {}}
        ports.append(index[key])
    return index[key]


def parse(text: str) -> dict[str, Any]:
    """Counters per device/port, in the order the listing names them."""
    ports: list[dict[str, Any]] = []
    index: dict[tuple[Any, Any], dict[str, Any]] = {}
    listed = 0  # lines of either shape, whatever their value
    bare_names: list[str] = []
    other = 0  # non-blank lines of neither shape
    for raw in text_lines(text):
        line = strip_prefix(raw).rstrip()
        if not line.strip():
            continue
        m = _PATH.match(line)
        if m:
            listed += 1
            if m.group("dir") != "hw_counters":
                continue
            where = _PORT.search(m.group("path"))
            device = where.group("device") if where else None
            port = int(where.group("port")) if where and where.group("port") else None
            value = _INT.match(m.group("value"))
            entry = _entry(ports, index, device, port)
            if value:
                entry["counters"][sys.intern(m.group("name"))] = int(value.group(1))
            continue
        m = _BARE.match(line)
        if m and "/" not in line:
            # a bare pair counts only with a counter-like value: other "word: text" lines
            # (a traceback, an ibstat header) do not make a listing
            value = _INT.match(m.group("value"))
            if not value and not _NA.match(m.group("value")):
                continue
            listed += 1
            bare_names.append(m.group("name"))
            entry = _entry(ports, index, None, None)
            if value:
                entry["counters"][sys.intern(m.group("name"))] = int(value.group(1))
            continue
        other += 1
    if bare_names and all(p["device"] is None for p in ports):
        if not _KNOWN.intersection(bare_names):
            fail(WHAT, "no hw_counters path and no known hw_counters name "
                       "(out_of_sequence, np_cnp_sent, ...)")
        if other > len(bare_names) // 4:
            fail(WHAT, f"{other} line(s) that are not name:value counters")
    if not listed:
        fail(WHAT, "no 'path:value' or 'name:value' lines found")
    if not any(p["counters"] for p in ports) and all(p["device"] is None for p in ports):
        fail(WHAT, "no counter with an integer value and no hw_counters path")
    if not ports:
        fail(WHAT, "only IBA counters/ files were listed, no hw_counters/ file")
    return {"ports": ports}
