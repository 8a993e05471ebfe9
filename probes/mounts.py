"""mounts: the node's network and parallel filesystems and its local data mounts, and whether
each network filesystem still answers.

A hung NFS server, a Lustre client evicted by an OST, a FUSE daemon (JuiceFS, s3fs, gcsfuse)
that died under its mount, a local disk the kernel remounted read-only: every rank that touches
the path blocks or fails, and the job looks hung. This reads ``/proc/self/mountinfo`` (never a
file's contents) and asks each network mount for its statistics with ``stat -f`` (statfs(2),
which the client must answer from its server), every mount in the background at once and each
under its own limit (``STATFS_TIMEOUT_S``, whole seconds of ``date``): one hung mount costs the
section at most ``STATFS_WAIT_S`` and never delays the others. A statfs still running at its
limit has its process state read before it is killed (``diag:state=D``; a job the section
stopped waiting for, ``pending N STATE``): blocked in the kernel or asleep waiting for the
server is a hung mount, runnable is a host too busy to ask (not measured; probes/hangstate.py
says why). A statfs that does not die is left behind (a process in uninterruptible sleep on a
hard mount cannot be killed); its output goes to a private temporary directory, never to this
script's output, so it cannot hold the session open.
Where ``lctl`` exists and Lustre is mounted, each OSC/MDC import's state is read
(``lctl get_param osc.*.state mdc.*.state``), and whether the administrator deactivated it
(``osc.*.active``, ``mdc.*.active``: 0 for a target taken out of service).
Where IBM Storage Scale (GPFS) is installed, ``mmhealth node show -Y`` (read-only, under a
time limit) says whether its daemon and file systems are healthy on the node (mounts_gpfs.py);
where wekafs is mounted, ``weka local ps --json`` whether its client container runs
(mounts_weka.py).

The facts are told in ``mounts_facts.py``.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from typing import Any

from probes.base import Context, Probe, guard_parse, not_measured, script
from probes.model import Finding
from probes.mounts_facts import LOCAL_FS, NETWORK_FS, SKIP_AUTOFS, SKIP_RUNTIME, SKIP_TREES
from probes.mounts_facts import parse as _parse
from probes.mounts_gpfs import GPFS_COMMAND
from probes.mounts_weka import WEKA_COMMAND

NAME = "mounts"
MAX_MOUNT_LINES = 300
MAX_STATFS = 48  # distinct filesystems (st_dev) asked at once
STATFS_TIMEOUT_S = 5
STATFS_WAIT_S = 8  # the job's own limit (5-6 s: whole seconds of date +%s) and the shells' overhead

# the trees left out (mounts_facts.SKIP_TREES, SKIP_RUNTIME), as awk regular expressions
_SKIP = SKIP_TREES.replace("/", "\\/")
_SKIP_RUNTIME = SKIP_RUNTIME.replace("/", "\\/")
_SKIP_AUTOFS = SKIP_AUTOFS.replace("/", "\\/")
# Which mountinfo lines are printed (mounts_facts.selected applies the same rule to what it
# reads): every network filesystem (FUSE included) outside the kernel's and the OS's trees
# (/proc, /sys: lxcfs serves /proc/cpuinfo there; /usr, read-only by design), and local
# data mounts (a whole filesystem, not a bind of a subdirectory, outside the kernel's, the
# boot's and the container runtimes' trees), plus tmpfs at /tmp and /dev/shm; and autofs
# triggers (mounts_facts.is_trigger): printed with the mounts, never asked (statfs mounts them).
_SELECT = (
    "BEGIN{n=split(\"" + " ".join(sorted(NETWORK_FS)) + "\",a,\" \");"
    "for(i=1;i<=n;i++)net[a[i]]=1;"
    "n=split(\"" + " ".join(sorted(LOCAL_FS)) + "\",b,\" \");for(i=1;i<=n;i++)loc[b[i]]=1}"
    "{for(i=7;i<=NF;i++)if($i==\"-\")break;t=$(i+1);mp=$5;"
    f"if(mp!=\"/dev/shm\"&&mp ~ /{_SKIP}/)next;"
    "if((t in net)||t ~ /^fuse\\./){SEL;next}"
    f"if(mp ~ /{_SKIP_RUNTIME}/)next;"
    f"if(t==\"autofs\"){{if(mp !~ /{_SKIP_AUTOFS}/)AUTO;next}}"
    "if((t in loc)&&($4==\"/\"||mp==\"/\")){SEL;next}"
    "if(t==\"tmpfs\"&&(mp==\"/tmp\"||mp==\"/dev/shm\"))SEL}"
)
_MOUNTS = ("awk '" + _SELECT.replace("SEL", "print").replace("AUTO", "print")
           + "' /proc/self/mountinfo "
           f"| head -n {MAX_MOUNT_LINES} | cut -c1-1000")
# st_dev|mountpoint of each selected mount, one per filesystem, autofs triggers never touched
_TARGETS = ("awk '" + _SELECT.replace("SEL", "print $3 \"|\" $5").replace("AUTO", "t=t")
            + "' /proc/self/mountinfo "
            f"| awk -F'|' '!s[$1]++' | head -n {MAX_STATFS}")
# One statfs, in a shell of its own ($1 index, $2 st_dev, $3 escaped mount point, $4 result
# directory). A new shell and not a subshell: a forked subshell keeps the script's saved copies
# of its output (dash keeps them at fd 10 and up, which a script cannot close), and a statfs
# stuck in D state would hold the session's output open through them.


def _state(pid: str) -> str:
    """The one-letter state of process *pid* (a shell word): /proc/PID/stat's third field,
    after the command name in parentheses, which may hold spaces. R runnable, S asleep, D
    blocked in the kernel."""
    return f"sed 's/.*) //' \"/proc/{pid}/stat\" 2>/dev/null | cut -c1"


_JOB = (
    "p=$(printf \"%b\" \"$3\"); t0=$(date +%s%N); "
    "stat -f -c \"%S %b %f %a %c %d\" -- \"$p\" >\"$4/$1.o\" 2>&1 </dev/null & s=$!; "
    "echo \"$s\" >\"$4/$1.pid\"; "
    f"e=$(( $(date +%s) + {STATFS_TIMEOUT_S + 1} )); st=; "
    "while kill -0 \"$s\" 2>/dev/null; do "
    "if [ \"$(date +%s)\" -ge \"$e\" ]; then "
    # still running at the limit: its state first (blocked in the kernel, asleep waiting for
    # the server, or only runnable on a busy host: probes/hangstate.py), then it is ended
    f"st=$({_state('$s')}); st=${{st:-?}}; kill -KILL \"$s\" 2>/dev/null; break; fi; "
    "sleep 0.1 2>/dev/null || sleep 1; done; "
    "if [ -n \"$st\" ]; then rc=124; r=\"diag:state=$st\"; "
    "else wait \"$s\"; rc=$?; r=$(head -n 1 \"$4/$1.o\" 2>/dev/null | cut -c1-160); fi; "
    "t1=$(date +%s%N); "
    "printf \"%s %s %s %s\\n\" \"$rc\" \"$t0\" \"$t1\" \"$r\" >\"$4/$1.t\" && "
    "mv \"$4/$1.t\" \"$4/$1\""
)
_STATFS = (
    "if diag_t=$(mktemp -d \"${TMPDIR:-/tmp}/diag-statfs.XXXXXX\" 2>/dev/null); then "
    "i=0; set -f; "
    f"for e in $({_TARGETS}); do i=$((i+1)); dev=${{e%%|*}}; mp=${{e#*|}}; "
    "echo \"stat $i $dev $mp\"; "
    f"sh -c {shlex.quote(_JOB)} diag-statfs \"$i\" \"$dev\" \"$mp\" \"$diag_t\" "
    "</dev/null >/dev/null 2>&1 & done; set +f; "
    f"n=0; while [ $n -lt {STATFS_WAIT_S * 10} ]; do c=0; j=1; "
    "while [ $j -le $i ]; do [ -e \"$diag_t/$j\" ] && c=$((c+1)); j=$((j+1)); done; "
    "[ $c -ge $i ] && break; sleep 0.1 2>/dev/null || sleep 1; n=$((n+1)); done; "
    "j=1; while [ $j -le $i ]; do if [ -e \"$diag_t/$j\" ]; then "
    "while IFS= read -r l; do echo \"result $j $l\"; done <\"$diag_t/$j\"; "
    "else echo \"pending $j $(cat \"$diag_t/$j.pid\" 2>/dev/null | head -n 1 | "
    f"{{ read -r q && [ -n \"$q\" ] && {_state('$q')}; }})\"; fi; "
    "j=$((j+1)); done; rm -rf \"$diag_t\"; "
    "else echo 'statfs_error cannot create a temporary directory'; false; fi"
)
_LUSTRE = (
    "if grep -q ' - lustre ' /proc/self/mountinfo 2>/dev/null; then "
    "if command -v lctl >/dev/null 2>&1; then "
    "timeout 5 lctl get_param 'osc.*.state' 'mdc.*.state' 'osc.*.active' 'mdc.*.active' 2>&1 "
    "| grep -E '^(osc|mdc)\\.|current_state|rror|ermission' | head -n 800 | cut -c1-300; "
    "else echo 'lctl missing'; fi; else echo 'no lustre mounts'; fi"
)


def command(params: Mapping[str, Any]) -> str:
    return script([("mounts", _MOUNTS), ("statfs", _STATFS), ("lustre", _LUSTRE),
                   ("gpfs", GPFS_COMMAND), ("weka", WEKA_COMMAND)])


parse = guard_parse(NAME, _parse)


def check(host: str, facts: dict[str, Any], ctx: Context) -> list[Finding]:
    findings: list[Finding] = []
    errors = facts.get("errors") or {}
    for section in [s for s in facts.get("missing", []) if s != "lctl"]:
        findings.append(not_measured(NAME, host, f"mounts ({section})",
                                     f"the {section} section did not run"))
    if "mounts" in errors:
        findings.append(not_measured(NAME, host, "mounts", errors["mounts"]))
    if "statfs" in errors:
        findings.append(not_measured(NAME, host, "network mounts answering (statfs)",
                                     errors["statfs"]))
    unasked = [m["mountpoint"] for m in facts.get("mounts") or []
               if m.get("network") and m.get("hung") is None]
    if unasked and "statfs" not in errors and "statfs" not in facts.get("missing", []):
        findings.append(not_measured(
            NAME, host, f"statfs of {len(unasked)} network mount(s) ({', '.join(unasked[:4])})",
            "not asked (over the cap of filesystems asked at once) or stat failed to run"))
    if "lctl" in facts.get("missing", []):
        findings.append(not_measured(NAME, host, "Lustre import state",
                                     "Lustre is mounted but lctl is not installed"))
    elif "lustre" in errors:
        findings.append(not_measured(NAME, host, "Lustre import state", errors["lustre"]))
    if "gpfs" in errors:  # GPFS installed, its health not read (a host without it: no finding)
        findings.append(not_measured(NAME, host, "IBM Storage Scale health (mmhealth)",
                                     errors["gpfs"]))
    if "weka" in errors:
        findings.append(not_measured(NAME, host, "WEKA client containers (weka local ps)",
                                     errors["weka"]))
    return findings


PROBE = Probe(NAME, command, parse, check, timeout_s=30.0)
