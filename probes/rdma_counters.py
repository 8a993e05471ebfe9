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

The counters are read twice in the network probe's script, like the others, so the checks see
what happened during the sample and the retransmit rate per second, never totals since boot.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from typing import Any

from probes.base import Context, finding, mad_outliers
from probes.model import Finding
from probes.parsers import ParseError
from probes.parsers import parse as parse_kind

NAME = "network"

TIMEOUTS = ("local_ack_timeout_err",)
RNR = ("rnr_nak_retry_err",)  # the peer's application, not the path (module doc)
SEQUENCE = ("packet_seq_err", "implied_nak_seq_err")
REORDER = ("out_of_sequence", "duplicate_request")
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
        return
    before, after = hw_sample(first), hw_sample(second)
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
    facts["out_of_sequence_delta"] = total(("out_of_sequence",))
    facts["cnp_delta"] = total(("np_cnp_sent", "rp_cnp_handled"))
    facts["ecn_marked_delta"] = total(("np_ecn_marked_roce_packets",))
    if interval:
        facts["retransmit_rate_per_s"] = round(
            (facts["retransmit_delta"] + facts["out_of_sequence_delta"]) / interval, 1)


def _scaled(ctx: Context, key: str, facts: Mapping[str, Any]) -> float:
    base = ctx.threshold("network_sample_interval_s") or 1
    return float(ctx.threshold(key) * max(1.0, (facts.get("sample_interval_s") or base) / base))


def retransmit_findings(host: str, facts: dict[str, Any], ctx: Context) -> list[Finding]:
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
    flagged = {h for h, f in facts_by_host.items()
               if retransmit_findings(h, f, ctx)}
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

