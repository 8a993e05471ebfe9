"""Rank progress: which rank of a hung NCCL job holds everyone else up, read from its logs.

When a 1,024-rank job hangs, 1,023 ranks wait in the same collective for one rank that never
arrived. PyTorch's ProcessGroupNCCL says enough in each rank's log to find it: the watchdog's
``Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1580, OpType=ALLREDUCE ...)``,
``... detected by watchdog at work: 7753, last enqueued NCCL work: 7755, last completed NCCL
work: 7752`` (and its other spellings), the heartbeat monitor's ``Received a dump signal ...
Last enqueued NCCL work: 166, last completed NCCL work: 166`` on ranks that did *not* time out,
and ``watchdog got stuck for 480 seconds`` when a CUDA/NCCL call hung the watchdog itself.
Comparing those numbers across ranks, per process group, names:

- the straggler: a rank that timed out at an earlier sequence number, completed fewer
  collectives than the majority, or never timed out (never enqueued the collective) while the
  others did;
- a collective mismatch: ranks waiting in different ops at the same sequence number, i.e. the
  code path diverged (an application bug, not a node fault);
- a stuck watchdog: a CUDA/NCCL call hung in that rank.

The package is pure (text in, dicts out) so the ``ranks`` probe (lines grepped on every node,
merged across hosts), ``diag parse rank-logs`` and the benchmark share one implementation. It
has three rooms, each leaning only on the ones before it:

- ``grammar``: which lines matter (the EREs the node greps with) and what one line says;
- ``scan``: one file's lines folded into per-rank rows, and files from many hosts merged;
- ``verdict``: the rows compared across ranks, per process group, into the analysis.

Ranks are mapped to hosts from NCCL's ``host:pid:tid`` line prefix, NCCL's init lines
(``comm 0x.. rank 37 nranks 64``), the node a node-local log was read on, or an operator map.
The findings the ``ranks`` probe raises from an analysis live with that probe.
"""
