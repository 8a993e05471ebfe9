"""PyTorch/NCCL rank logs: one or several ranks' logs, concatenated, read for rank progress.

``diag parse rank-logs FILE`` runs the same analysis as the ``ranks`` probe on logs the operator
has at hand: which ranks timed out at which NCCL sequence number and op, which rank is behind
(the one the others wait for), ranks waiting in different collectives, a stuck watchdog.
Several logs can be concatenated as ``tail -n +1 rank*.log`` prints them (``==> rank3.log <==``
headers): a header names the file, so a per-rank file's name gives its rank.
"""

from __future__ import annotations

from typing import Any

from probes.rankprogress.grammar import parse_line, relevant_lines
from probes.rankprogress.verdict import analyse_text

from ._common import fail

WHAT = "PyTorch/NCCL rank log"


def parse(text: str) -> dict[str, Any]:
    """The rank analysis of the text (see probes.rankprogress.verdict.analyse for the keys)."""
    if not any(parse_line(line) for line in relevant_lines(text)):
        fail(WHAT, "no ProcessGroupNCCL watchdog/progress line and no NCCL 'rank N nranks M' "
                   "init line found")
    return analyse_text(text)
