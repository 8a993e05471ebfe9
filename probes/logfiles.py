"""Shell pieces that list and grep the job's log files (the operator's ``--logs`` glob), shared
by the nccl, joblog and ranks probes (the logs component has its own, probes/logs_script.py).

A file of an earlier run is not read: one last written before the job started
(``params["job_start_epoch"]``, Slurm's StartTime of the running job, less ``STALE_SLACK_S``)
or, when no job start is known, one not written for ``window_minutes`` (default
``WINDOW_MINUTES``). A glob that reaches last week's run, or an output file re-used by this
one, must not give last week's OOM or NCCL error as this incident's (the logs component names
such files: job-log-earlier-run).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from typing import Any

LOG_TAIL_LINES = 20000
# diag policy: a file whose last write is this much before the job's StartTime predates it.
# Slurm's StartTime is to the second and NTP keeps nodes within milliseconds of the client
# that ran scontrol; two minutes leaves room for a node's clock that drifted.
STALE_SLACK_S = 120
# diag policy, without a job start: a file not written for a day is not this incident's (the
# same window as torchrun's default log directories, probes/logs_script.py); a post-mortem of
# an older run widens it with --param PROBE.window_minutes=N
WINDOW_MINUTES = 1440

_GLOB_PART = re.compile(r"(\*|\?|\[!?[A-Za-z0-9_.\-]+\])")


def glob_word(pattern: str) -> str:
    """A shell word expanding like the glob *pattern*, everything else taken literally.

    ``*``, ``?`` and simple ``[...]`` classes stay live; every other character is quoted, so a
    path from a runbook or the command line can never inject shell syntax. ``~/`` is $HOME.
    """
    prefix = ""
    if pattern.startswith("~/"):
        prefix, pattern = '"$HOME"/', pattern[2:]
    parts = _GLOB_PART.split(pattern)
    return prefix + "".join(p if i % 2 else shlex.quote(p) for i, p in enumerate(parts) if p)


def _positive(value: Any) -> float | None:
    if not isinstance(value, int | float) or isinstance(value, bool) or value <= 0:
        return None
    return float(value)


def stale_cutoff(params: Mapping[str, Any]) -> tuple[int, int]:
    """(the earliest last write of a current file in seconds since the epoch, or 0; the
    window in seconds, used when the first is 0) from the probe's params."""
    start = _positive(params.get("job_start_epoch"))
    window = _positive(params.get("window_minutes")) or WINDOW_MINUTES
    return (max(0, int(start) - STALE_SLACK_S) if start else 0), int(window * 60)


def _kept_sh(cutoff: tuple[int, int] | None, stale: bool) -> str:
    """Shell reading file names and printing the current ones (*stale*: the others, each as
    "AGE_S PATH"). A file whose time cannot be read is current: not measured is no proof."""
    if cutoff is None:
        return "" if stale else "echo \"$f\""
    since, window = cutoff
    old = (f"[ \"$m\" -lt {int(since)} ]" if since else
           f"[ \"$n\" -gt 0 ] && [ $((n - m)) -gt {int(window)} ]")
    show = "echo \"$((n - m)) $f\"" if stale else "echo \"$f\""
    test = f"if {old}; then {show if stale else ':'}; else {':' if stale else show}; fi"
    return ("m=$(stat -L -c %Y -- \"$f\" 2>/dev/null); case \"$m\" in ''|*[!0-9]*) "
            f"{':' if stale else show};; *) {test};; esac")


def log_files_sh(log: str, limit: int = 8, cutoff: tuple[int, int] | None = None,
                 stale: bool = False) -> str:
    """Shell listing the newest *limit* regular files matching the glob *log*, one a line;
    with *cutoff* (``stale_cutoff``) only the current ones, or with *stale* the others
    ("AGE_S PATH")."""
    keep = _kept_sh(cutoff, stale) or ":"
    return (f"n=$(date +%s 2>/dev/null); case \"$n\" in ''|*[!0-9]*) n=0;; esac; "
            f"ls -1td -- {glob_word(log)} 2>/dev/null | head -n {int(limit)} | "
            f"while IFS= read -r f; do if [ -f \"$f\" ]; then {keep}; fi; done")


def log_grep_sh(log: str, ere: str, lines: int = LOG_TAIL_LINES, keep: int = 4000,
                head_ere: str | None = None, ignore_case: bool = False,
                cutoff: tuple[int, int] | None = None) -> str:
    """Shell printing the lines matching *ere* among the last *lines* lines of each log file.

    With *head_ere*, lines matching it anywhere in the files come first (bounded by grep -m):
    init lines such as NCCL's "Using network" are printed once, long before a hang's tail.
    """
    files = f"{{ {log_files_sh(log, cutoff=cutoff)}; }}"
    flags = "-aiE" if ignore_case else "-aE"
    head = ""
    if head_ere:
        head = (f"{files} | while IFS= read -r f; do timeout 20 grep -m 64 -aE "
                f"{shlex.quote(head_ere)} \"$f\"; done | cut -c1-2000; ")
    return (f"{head}{files} | while IFS= read -r f; do timeout 20 tail -n {int(lines)} \"$f\"; "
            f"done | grep {flags} {shlex.quote(ere)} | cut -c1-2000 | tail -n {int(keep)}")
