"""A remote command that ends on the host when diag stops waiting for it.

Closing an SSH channel does not stop the command behind it: OpenSSH's sshd sends no signal to
a session without a terminal, so a probe that hung (an ``nvidia-smi`` stuck on a wedged GPU, a
``df`` on a dead NFS mount) kept running on the node after diag's timeout or cancel, one more
per retry. So the command is wrapped (when the host has ``setsid`` and a ``timeout`` that
takes ``-k``, i.e. util-linux and coreutils or busybox):

- ``setsid`` puts it in a session and process group of its own, whose id it prints first on
  stderr (``=== diag:pgid N``; stripped from what the caller sees), so diag can end the whole
  tree — children included — with ``kill -- -N`` over the same connection;
- ``timeout -k GRACE_S LIMIT`` ends it on the host by itself a little after diag's own timeout, even
  when diag can no longer reach the node or was killed. ``timeout`` sends TERM to the whole
  group but exits as soon as its own child does, before its KILL: a shell that died of the TERM
  left a test that ignores TERM (an ``all_reduce_perf`` under the shell) running for good. So
  the child of ``timeout`` is :data:`HOLD`, which runs the command and, once TERM came, stays
  until ``timeout``'s KILL ends the whole group, TERM-ignoring test included, the grace later
  (issue 29 item 14).

A host without those tools runs the command as before. The script runs under ``sh``, which is
what probes are written for, and a leading comment line (``# diag probe: NAME (read-only)``)
stays the first line of what the host sees, for its process list and logs.
"""

from __future__ import annotations

import math
import re
import shlex

from probes.hangstate import AGAIN, AGAIN_AFTER_S

MARK = "=== diag:pgid "
_MARK_LINE = re.compile(r"=== diag:pgid (\d+)\n")
# The remote limit runs this much past diag's timeout, so diag's fires first and has the time
# to look at the command's processes twice (hangstate.AGAIN_AFTER_S apart) before it kills
# them (2 s left a loaded host's kill behind the remote limit)
GRACE_S = 4


# The child of ``timeout``: runs the command ($1, under the shell $2, sh by default) and waits for
# it; after a TERM (the limit, or diag's kill) it outlives the command until timeout's KILL,
# GRACE_S later, ends every process of the group. Its stdin stays the command's.
HOLD = ('t=0; trap t=1 TERM; "${2:-sh}" -c "$1" <&0 & c=$!; '
        'while :; do wait "$c"; r=$?; kill -0 "$c" 2>/dev/null || break; done; '
        f'if [ "$t" = 1 ]; then sleep {GRACE_S + 3}; fi; exit "$r"')


def bounded(limit: int) -> str:
    """``timeout -k GRACE LIMIT sh -c HOLD diag``: the command to run follows as one argument
    (then optionally its shell); the group is TERMed at *limit* and KILLed GRACE_S later."""
    return f"timeout -k {GRACE_S} {limit} sh -c {shlex.quote(HOLD)} diag"


def wrap(command: str, timeout: float) -> str:
    """*command* to run in its own process group under a remote time limit (see module doc)."""
    limit = max(1, math.ceil(timeout)) + GRACE_S
    head = ""
    if command.startswith("#"):
        first, _, rest = command.partition("\n")
        head, command = first + "\n", rest
    inner = f'echo "{MARK}$$" >&2; exec {bounded(limit)} "$1"'
    return (f"{head}diag_script={shlex.quote(command)}\n"
            "if command -v setsid >/dev/null 2>&1 && timeout -k 1 1 true 2>/dev/null; then\n"
            f"  setsid sh -c {shlex.quote(inner)} diag \"$diag_script\"\n"
            "else\n"
            "  sh -c \"$diag_script\"\n"
            "fi\n")


def process_group(stderr_head: bytes) -> int | None:
    """The remote process group announced at the start of stderr, if it was."""
    match = _MARK_LINE.match(stderr_head.decode("ascii", errors="replace"))
    return int(match.group(1)) if match else None


def strip_mark(stderr: str) -> str:
    """*stderr* without the process-group line the wrapper printed first."""
    return _MARK_LINE.sub("", stderr, count=1) if stderr.startswith(MARK) else stderr


def kill_command(pgid: int) -> str:
    """Ends every process of the group: TERM, then KILL for whatever ignored it. Written
    ``kill -TERM -N``: dash (Debian's sh) refuses both ``kill -TERM -- -N`` and
    ``kill -s TERM -N``."""
    return f"kill -TERM -{pgid} 2>/dev/null; sleep 1; kill -KILL -{pgid} 2>/dev/null; true"


STATES_END = "=== diag:ps-end"


def states_then_kill(pgid: int) -> str:
    """The group's processes as ps sees them ("PID STAT ELAPSED WCHAN COMM", the rows
    probes/hangstate.py reads: blocked in the kernel, or only slow?), an end mark, then
    :func:`kill_command`. ps reads /proc's stat files, not the processes' memory, so a
    process stuck in the kernel does not stop it; the caller still bounds its wait."""
    select = ("ps -e -o pgid= -o pid= -o stat= -o etimes= -o wchan:40= -o comm= 2>/dev/null "
              f"| awk -v g={int(pgid)} '$1 == g {{ $1 = \"\"; sub(/^ +/, \"\"); print }}'")
    # two looks a second apart: blocked at both is a hang, at one a busy disk (hangstate.py)
    return (f"{select}; echo '{AGAIN}'; sleep {AGAIN_AFTER_S}; {select}; echo '{STATES_END}'; "
            f"{kill_command(pgid)}")
