"""RDMA retransmits and congestion from the ports' ``hw_counters``, judged as deltas.

The IBA PortCounters say whether a link is healthy; the NIC's own ``hw_counters`` say what the
transport had to do about it (names and meanings from the kernel's mlx5 counters,
IB/mlx5 "Add port protocol stats", and the IBA reliable-connection rules):

- ``local_ack_timeout_err``: the requester's ACK timer expired and it retransmitted. At NCCL's
  default NCCL_IB_TIMEOUT=20 each timeout is 4.096 us x 2^20, about 4.3 s (NCCL docs): any rise
  is a multi-second stall of a collective.
- ``rnr_nak_retry_err``: the responder kept answering "receiver not ready" until the retries
  ran out. Read and kept (``rnr_retry_delta``) but never a retransmit of the fabric's: an RNR
  NAK says the responder's QP had no receive buffer posted (IBA 9.7.5.2.8, "Receiver Not
  Ready"; rdma-core ibv_poll_cq(3) IBV_WC_RNR_RETRY_EXC_ERR), which is the peer's application
  (its rank exited or stalled), not a packet lost on the path.
- ``packet_seq_err`` / ``implied_nak_seq_err``: NAKs for a sequence gap, i.e. packets lost on
  the way and retransmitted go-back-N; ``out_of_sequence``: packets received out of order
  (also counted with adaptive routing, so judged against the fleet, not in absolute terms);
  ``duplicate_request``: requests received again (the peer retransmitted).
- RoCE congestion control (DCQCN): ``np_ecn_marked_roce_packets`` (ECN-marked packets
  received), ``np_cnp_sent`` (CNPs this host sent back), ``rp_cnp_handled`` (CNPs it received
  and slowed down for). They show congestion that is being handled, not loss; a host far above
  its peers is a congested receiver or an incast.

The same counters under other drivers' names (Linux drivers/infiniband/hw/...):

- mlx4 (main.c diag_basic/diag_ext): ``sq_num_to`` (the requester's transport timeouts),
  ``sq_num_oos`` (out-of-sequence NAKs received), ``rq_num_oos`` (out-of-sequence requests
  received), ``rq_num_dup`` (duplicate requests), ``sq_num_rnr`` (RNR NAKs received);
- bnxt_re (hw_counters.c bnxt_re_stat_descs): ``to_retransmits`` (retransmits on ACK timeout),
  ``seq_err_naks_rcvd``, ``oos_drop_count`` (out-of-sequence packets dropped), ``dup_req``,
  ``rnr_naks_rcvd``.

irdma publishes no RC retransmit counter for RoCE (its hw_stats are IP/UDP/TCP and CNP
counts), EFA's SRD transport retransmits by design (efa_verbs.c ``retrans_pkts``,
``retrans_timeout_events``: kept in ``port_counters``, no published threshold), and soft
devices (rxe, siw) have none: an Active port without any counter of the lists above is "not
measured" for retransmits (``retransmit_unmeasured``), never healthy and never a fault.

The counters are read twice in the network probe's script, like the others, so the checks see
what happened during the sample and the retransmit rate per second, never totals since boot.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from typing import Any

from probes.base import Context, finding, mad_outliers, not_measured
from probes.model import Finding
from probes.parsers import ParseError
from probes.parsers import parse as parse_kind

NAME = "network"

# mlx5 names first, then mlx4's and bnxt_re's for the same events (module doc)
TIMEOUTS = ("local_ack_timeout_err", "sq_num_to", "to_retransmits")
RNR = ("rnr_nak_retry_err", "sq_num_rnr", "rnr_naks_rcvd")  # the peer's application (doc)
SEQUENCE = ("packet_seq_err", "implied_nak_seq_err", "sq_num_oos", "seq_err_naks_rcvd")
REORDER = ("out_of_sequence", "duplicate_request", "rq_num_oos", "rq_num_dup",
           "oos_drop_count", "dup_req")
OUT_OF_ORDER = ("out_of_sequence", "rq_num_oos", "oos_drop_count")
RETRANSMIT = TIMEOUTS + SEQUENCE + REORDER  # a port with none of them is not measured
CONGESTION = ("np_cnp_sent", "rp_cnp_handled", "np_ecn_marked_roce_packets")
COUNTERS = TIMEOUTS + RNR + SEQUENCE + REORDER + CONGESTION
# The ERE that keeps the script's sample to these files.
GREP_ERE = "/(" + "|".join(COUNTERS) + "):"


def hw_sample(text: str) -> dict[str, dict[str, int]]:
    """hw_counters per "ca/port" from one grep listing (ib-hw-counters parser)."""
    if not text.strip():
        return {}
    try:
        ports = parse_kind("ib-hw-counters", text)["ports"]
    except ParseError:
        return {}
    return {f"{p['device']}/{p['port'] or 1}": p["counters"] for p in ports if p["device"]}


def parse_hw(first: str | None, second: str | None, interval: float | None,
             facts: dict[str, Any]) -> None:
    """Per-port deltas of the hw_counters and the host's retransmit and CNP totals."""
    if first is None or second is None:
        return  # the script took no hw sample (an older script's recording): nothing to judge
    before, after = hw_sample(first), hw_sample(second)
    facts["retransmit_unmeasured"] = unmeasured(facts.get("ports") or [], before, after)
    if not before or not after:
        return
    deltas: dict[str, dict[str, int]] = {}
    for key, now in after.items():
        for name, value in now.items():
            then = before.get(key, {}).get(name)
            if then is not None:
                deltas.setdefault(key, {})[name] = value - then if value >= then else value
    facts["hw_counter_deltas"] = {k: {n: v for n, v in d.items() if v}
                                  for k, d in sorted(deltas.items()) if any(d.values())}

    def total(names: tuple[str, ...]) -> int:
        return sum(d.get(n, 0) for d in deltas.values() for n in names)

    facts["retransmit_delta"] = total(TIMEOUTS + SEQUENCE)
    facts["ack_timeout_delta"] = total(TIMEOUTS)
    facts["rnr_retry_delta"] = total(RNR)
    facts["out_of_sequence_delta"] = total(OUT_OF_ORDER)
    facts["cnp_delta"] = total(("np_cnp_sent", "rp_cnp_handled"))
    facts["ecn_marked_delta"] = total(("np_ecn_marked_roce_packets",))
    if interval:
        facts["retransmit_rate_per_s"] = round(
            (facts["retransmit_delta"] + facts["out_of_sequence_delta"]) / interval, 1)


def unmeasured(ports: list[dict[str, Any]], before: Mapping[str, Mapping[str, int]],
               after: Mapping[str, Mapping[str, int]]) -> list[str]:
    """The Active ports with no retransmit counter in both samples ("ca/port")."""
    def has(sample: Mapping[str, Mapping[str, int]], key: str) -> bool:
        return any(name in RETRANSMIT for name in sample.get(key, {}))
    keys = [f"{p['ca']}/{p['port']}" for p in ports if p.get("state") == "Active"]
    return [key for key in keys if not (has(before, key) and has(after, key))]


def _driver_hint(key: str) -> str:
    ca = key.partition("/")[0]
    if ca.startswith("efa"):
        return "EFA (SRD retransmits by design; retrans_pkts kept in port_counters)"
    if ca.startswith(("irdma", "rdmap")):
        return "irdma (no RC retransmit hw_counter for RoCE)"
    if ca.startswith(("rxe", "siw")):
        return "a soft RDMA device (no hw_counters)"
    return "no retransmit hw_counters file read"


def unmeasured_findings(host: str, facts: Mapping[str, Any]) -> list[Finding]:
    keys = facts.get("retransmit_unmeasured") or []
    if not keys:
        return []
    shown = ", ".join(f"{k} ({_driver_hint(k)})" for k in keys[:8])
    return [not_measured(
        NAME, host, f"RDMA retransmits of {len(keys)} Active port(s)",
        f"{shown}{' ...' if len(keys) > 8 else ''}: none of the mlx5 (local_ack_timeout_err, "
        "packet_seq_err, out_of_sequence), mlx4 (sq_num_to, sq_num_oos) or bnxt_re "
        "(to_retransmits, seq_err_naks_rcvd) counters was read for them in both samples")]


def _scaled(ctx: Context, key: str, facts: Mapping[str, Any]) -> float:
    base = ctx.threshold("network_sample_interval_s") or 1
    return float(ctx.threshold(key) * max(1.0, (facts.get("sample_interval_s") or base) / base))


def retransmit_findings(host: str, facts: dict[str, Any], ctx: Context) -> list[Finding]:
    return unmeasured_findings(host, facts) + _retransmits(host, facts, ctx)


def _retransmits(host: str, facts: dict[str, Any], ctx: Context) -> list[Finding]:
    deltas = facts.get("hw_counter_deltas") or {}
    interval = facts.get("sample_interval_s")
    during = f"in {interval:g} s" if interval else "between the samples"
    seq_limit = _scaled(ctx, "rdma_seq_err_delta", facts)
    hits: dict[str, dict[str, int]] = {}
    for port, d in deltas.items():
        timeouts = {n: d[n] for n in TIMEOUTS if d.get(n, 0) > ctx.threshold(
            "rdma_ack_timeout_delta")}
        sequence = {n: d[n] for n in SEQUENCE if d.get(n, 0)}
        if sum(sequence.values()) <= seq_limit:
            sequence = {}
        if timeouts or sequence:
            hits[port] = {**timeouts, **sequence}
    if not hits:
        return []
    rate = facts.get("retransmit_rate_per_s")
    return [finding(
        "rdma-retransmits", [host],
        f"{host}: RDMA retransmits {during}"
        + (f" ({rate:g}/s)" if rate is not None else "") + " on "
        + ", ".join(f"{p} ({', '.join(f'{n} +{v}' for n, v in c.items())})"
                    for p, c in sorted(hits.items())),
        NAME, ports=hits, interval_s=interval, retransmit_rate_per_s=rate,
        ack_timeouts=sum(v for c in hits.values() for n, v in c.items() if n in TIMEOUTS))]


def fleet_findings(facts_by_host: dict[str, dict[str, Any]], ctx: Context) -> list[Finding]:
    """Hosts retransmitting or receiving congestion notifications far more than their peers."""
    findings = []
    k = ctx.threshold("outlier_mad_k")
    spread = ctx.threshold("rdma_fleet_min_spread")
    rates = {h: f["retransmit_rate_per_s"] for h, f in facts_by_host.items()
             if isinstance(f.get("retransmit_rate_per_s"), int | float)}
    flagged = {h for h, f in facts_by_host.items() if _retransmits(h, f, ctx)}
    high = {h: v for h, v in mad_outliers(rates, k=k, high=True, min_spread=spread).items()
            if h not in flagged}
    if high:
        findings.append(finding(
            "rdma-retransmits", high,
            f"RDMA retransmits and out-of-order packets far above the peers' "
            f"({statistics.median(rates.values()):g}/s) on "
            + ", ".join(f"{h} ({v:g}/s)" for h, v in sorted(high.items())),
            NAME, values=high, peers=len(rates)))
    cnps = {h: f["cnp_delta"] + (f.get("ecn_marked_delta") or 0)
            for h, f in facts_by_host.items() if isinstance(f.get("cnp_delta"), int)}
    congested = mad_outliers(cnps, k=k, high=True, min_spread=ctx.threshold(
        "roce_cnp_fleet_min_spread"))
    if congested:
        findings.append(finding(
            "roce-congestion", congested,
            f"RoCE congestion notifications (CNP/ECN) far above the peers' "
            f"({statistics.median(cnps.values()):g}) during the sample on "
            + ", ".join(f"{h} (+{v})" for h, v in sorted(congested.items())),
            NAME, values=congested, peers=len(cnps)))
    return findings

