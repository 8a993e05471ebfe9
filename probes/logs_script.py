"""The host-side script of the ``logs`` component: where the ranks' output is, and its lines.

Kept apart from probes/logs.py (the parser and checks) because it is mostly shell. Sources,
in order (the first ``MAX_FILES`` distinct files are read, one copy of a file however many
ways it was found):

- ``fd1``/``fd2``: what the training processes' stdout and stderr are, read through
  ``/proc/PID/fd/N`` (so a container's files are read through the process's own view, and a
  file renamed since is still the one it writes) when it is a regular file — not a pipe, a
  socket, a terminal or /dev/null;
- ``torchrun``: torch.distributed.elastic's log directories, ``<log_dir>/<run_id>_<random>/
  attempt_<restart>/<local_rank>/{error.json,stderr.log,stdout.log}`` (DefaultLogsSpecs in
  torch/distributed/elastic/multiprocessing/api.py): ``--log-dir``/``--log_dir`` from a
  live torchrun's command line, else its default ``tempfile.mkdtemp(prefix="torchelastic_")``
  under the process's TMPDIR; the newest run directory, newest attempt only;
- ``slurm``: Slurm's StdOut/StdErr patterns (``params["slurm_output"]``, job fields already
  expanded by the client); %N, %n, %t and %% are expanded here (``man sbatch``, "filename
  pattern"). With ``params["slurm_batch_host"]`` they are the batch step's output: every
  node's lines in one file (scope ``job``) written on that host, read wherever it is visible
  (on a shared file system each host takes the lines naming it);
- ``param``: the operator's ``--logs`` glob (``params["log"]``).

A file last written before the job started (``params["job_start_epoch"]``, Slurm's StartTime
of the running job, less ``STALE_SLACK_S`` for the clocks of two machines), or an operator's
``--logs`` file not written for ``window_minutes`` (default ``WINDOW_MINUTES``) when no job
start is known, holds an earlier run's output (a re-used output file, a glob reaching last
week's run): its lines go to the ``stale`` section, never the job stream.

Each file is tailed (``TAIL_BYTES``, then ``TAIL_LINES``) and grepped with the catalogue's
job-stream ERE; a few first and the last matching lines are kept, cut at ``LINE_CHARS``.
A file is this host's (``host``) or may hold every node's lines (``job``: what srun or mpirun
relays, the batch step's output, a file on a network file system); a line that names its
host (NCCL's ``host:pid:tid`` prefix, srun's ``error: host: task N``) says whose it is. The
lines this host answers for go to the ``lines`` section (the catalogue's job stream); those
naming another host, or from a shared file naming none, to ``others``.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from typing import Any

from probes.logfiles import STALE_SLACK_S, glob_word
from probes.logs_slurm import GLOB_FILES, MAX_NODES, slurm_files
from probes.logs_slurm import slurm_word as slurm_word  # re-exported (tests)
from probes.nccl import training_pids_sh

MAX_FILES = 24
TAIL_BYTES = 8 << 20
TAIL_LINES = 20000
LINE_CHARS = 2000
HEAD_KEEP = 10  # first matching lines kept per file (the first error is often the cause)
TAIL_KEEP = 50  # last matching lines kept per file
TORCHRUN_BASES = 2  # default torchelastic_* directories looked at, newest first
WINDOW_MINUTES = 1440  # default torchelastic_* dirs of no live torchrun: modified within this
MAX_PATTERNS = 8

# Launchers relay every node's output: their stdout is the job's, not this host's.
LAUNCHERS = ("srun", "mpirun", "mpiexec", "orterun", "prterun", "hydra_pmi_proxy",
             "slurmstepd")
# File systems shared between nodes (GNU stat -f %T names): a file there may be any node's.
NETWORK_FS = ("nfs*", "lustre", "gpfs", "beegfs", "cifs", "smb*", "fuse*", "ceph*", "9p",
              "wekafs", "panfs", "glusterfs", "afs", "pvfs2", "orangefs", "ocfs2", "gfs2",
              "UNKNOWN*", "?")

# torchrun's options in its command line, one argument a line: the log directory and the
# redirect/tee settings, up to the training script (its own --log_dir is not torchrun's).
_TORCHRUN_AWK = r"""
function base(s) { sub(/.*\//, "", s); return s }
stop { next }
t && w != "" { print w " " $0; w = ""; next }
t && ($0 == "-m" || $0 == "--module") { m = 1; next }
t && m { stop = 1; next }
t && $0 == "--" { stop = 1; next }
t && /\.py$/ { stop = 1; next }
t && /^--log[-_]dir=/ { v = $0; sub(/^--log[-_]dir=/, "", v); print "logdir " v; next }
t && /^--log[-_]dir$/ { w = "logdir"; next }
t && /^--redirects=/ { v = $0; sub(/^--redirects=/, "", v); print "redirects " v; next }
t && /^(--redirects|-r)$/ { w = "redirects"; next }
t && /^-r[0-9]/ { print "redirects " substr($0, 3); next }
t && /^--tee=/ { v = $0; sub(/^--tee=/, "", v); print "tee " v; next }
t && /^(--tee|-t)$/ { w = "tee"; next }
t && /^-t[0-9]/ { print "tee " substr($0, 3); next }
!t && (base($0) == "torchrun" || $0 == "torch.distributed.run" || \
       $0 == "torch.distributed.launch") { t = 1; print "is torchrun"; next }
"""

# A line's own time, where its program prints one: NCCL 2.26+ stamps WARN lines "[%F %T] "
# (NCCL_DEBUG_TIMESTAMP_FORMAT's default, NCCL_DEBUG_TIMESTAMP_LEVELS=WARN by default; NCCL
# Environment Variables), Python's logging and torchelastic "[%Y-%m-%d %H:%M:%S,mmm]", after
# torchrun's "[rankN]:" prefix. It is the process's local time, whose zone the host does not
# know: read as UTC it is at most LOCAL_SPREAD_S earlier than the real time (UTC-12 is the
# farthest zone behind UTC), so a stamp older than the cutoff by more than that is an earlier
# run's in any zone (a re-used output file the job appends to); a nearer one is counted.
# ("[[]" and "[]]" are a literal bracket without a backslash, which awk -v would eat)
STAMP_ERE = ("^([[]rank[0-9]+[]]: ?)?[[][0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9] "
             "[0-9][0-9]:[0-9][0-9]:[0-9][0-9]")
LOCAL_SPREAD_S = 12 * 3600

# One file's matching lines -> "h" header, "o" lines this host answers for, "x" the others,
# "s" lines stamped before the cutoff (an earlier run's).
# A line names its host by NCCL's "host:pid:tid [dev] [file:line] [(func)] NCCL" prefix or
# srun's "error: host: task"; torch elastic's failure table names it on the "host :" line
# before its "exitcode :" (CONTEXT_ERE lets those through, they are not printed). A file
# naming two hosts holds several nodes' output whatever its source.
CONTEXT_ERE = "^ *host *: [A-Za-z0-9]"
_CLASSIFY_AWK = r"""
/^ *host *: [A-Za-z0-9]/ {
  ctx = $0; sub(/^ *host *: */, "", ctx); sub(/[ \t].*/, "", ctx); ctx = tolower(ctx)
  sub(/\..*/, "", ctx); next
}
{
  n++; h = ""
  if (match($0,
      /[A-Za-z0-9][A-Za-z0-9._-]*:[0-9]+:[0-9]+ \[[0-9]+\] ([^ ]+ )?([^ ]+ )?([^ ]+ )?NCCL /)) {
    h = substr($0, RSTART, RLENGTH); sub(/:.*/, "", h)
  } else if (match($0, /srun: error: [A-Za-z0-9][A-Za-z0-9._-]*: task/)) {
    h = substr($0, RSTART + 13, RLENGTH - 13); sub(/: task$/, "", h)
  }
  h = tolower(h); sub(/\..*/, "", h)
  if (h == "" && ctx != "" && $0 ~ /^ *(exitcode|traceback|rank|error_file) *: /) h = ctx
  if (old != "" && match($0, STAMP) && substr($0, RSTART + RLENGTH - 19, 19) < old) h = "\001"
  if (h != "" && h != "\001") named[h] = 1
  if (n <= H) { L[n] = $0; N[n] = h } else { R[n % T] = $0; RN[n % T] = h }
}
END {
  if (n == 0) exit
  k = 0; for (x in named) k++
  shared = (sc == "job" || k > 1)
  print "h --- file " i " matched " n " named " k " shared " shared
  for (j = 1; j <= n && j <= H; j++) out(L[j], N[j])
  s = n - T + 1; if (s < H + 1) s = H + 1
  for (j = s; j <= n; j++) out(R[j % T], RN[j % T])
}
function out(line, host) {
  if (host == "\001") print "s " line
  else if (!shared || host == me) print "o " line; else print "x " line
}
"""


def _q(text: str) -> str:
    return shlex.quote(text)


def self_section() -> str:
    """Who this host is (for %N and to tell its own lines) and the time (files' age)."""
    return ("dlg_T=$(printf '\\t'); dlg_host=$(hostname 2>/dev/null); "
            "dlg_raw=$(hostname -s 2>/dev/null); [ -n \"$dlg_raw\" ] || dlg_raw=${dlg_host%%.*}; "
            "dlg_short=$(printf '%s' \"$dlg_raw\" | tr 'A-Z' 'a-z'); "
            "dlg_now=$(date +%s 2>/dev/null); case \"$dlg_now\" in ''|*[!0-9]*) dlg_now=0;; esac; "
            "echo \"host $dlg_host\"; echo \"short $dlg_raw\"; echo \"now $dlg_now\"")


def procs_section(pattern: str | None) -> str:
    """The training processes: their stdout/stderr targets, Slurm task ids, torchrun's
    log options. Candidate files go to $dlg_cand, torchrun bases to $dlg_trb."""
    launchers = "|".join(LAUNCHERS)
    return (
        "dlg_cand=; dlg_trb=; dlg_tr=0; dlg_procid=; dlg_nodeid=; "
        f"for p in $({training_pids_sh(pattern)}); do "
        "c=$(cat /proc/$p/comm 2>/dev/null) || continue; "
        f"case \"$c\" in {launchers}) sc=job;; *) sc=host;; esac; "
        "echo \"pid $p $sc $c\"; "
        "for n in 1 2; do "
        "if [ ! -r /proc/$p/fd ]; then echo \"fd$n $p ?\"; "
        "elif t=$(readlink /proc/$p/fd/$n 2>/dev/null); then "
        "t=$(printf '%s\\n' \"$t\" | head -n 1 | cut -c1-1000); echo \"fd$n $p $t\"; "
        "case \"$t\" in /dev/*|*' (deleted)') ;; /*) "
        "dlg_cand=\"${dlg_cand}fd$n${dlg_T}$sc${dlg_T}/proc/$p/fd/$n${dlg_T}$t\n\";; esac; "
        "else echo \"fd$n $p -\"; fi; done; "
        "e=$(tr '\\0' '\\n' 2>/dev/null < /proc/$p/environ "
        "| grep -aE '^(SLURM_PROCID|SLURM_NODEID|TMPDIR)=[^ ]*$' | cut -c1-300); "
        "v=$(printf '%s\\n' \"$e\" | sed -n 's/^SLURM_PROCID=\\([0-9][0-9]*\\)$/\\1/p'); "
        "[ -n \"$v\" ] && { echo \"slurm $p procid $v\"; dlg_procid=\"$dlg_procid $v\"; }; "
        "v=$(printf '%s\\n' \"$e\" | sed -n 's/^SLURM_NODEID=\\([0-9][0-9]*\\)$/\\1/p'); "
        "[ -n \"$v\" ] && { echo \"slurm $p nodeid $v\"; dlg_nodeid=$v; }; "
        f"a=$(tr '\\0' '\\n' 2>/dev/null < /proc/$p/cmdline | awk {_q(_TORCHRUN_AWK)} "
        "| cut -c1-1000); "
        "case \"$a\" in 'is torchrun'*) ;; *) continue;; esac; dlg_tr=1; "
        "printf '%s\\n' \"$a\" | sed \"s/^/torchrun $p /\"; "
        "d=$(printf '%s\\n' \"$a\" | sed -n 's/^logdir //p' | tail -n 1); "
        "tmp=$(printf '%s\\n' \"$e\" | sed -n 's/^TMPDIR=\\(\\/.*\\)$/\\1/p'); tmp=${tmp:-/tmp}; "
        "if [ \"$d\" = /dev/null ]; then continue; "
        "elif [ -n \"$d\" ]; then case \"$d\" in "
        "/*) if [ -d \"/proc/$p/root$d\" ]; then r=\"/proc/$p/root$d\"; else r=$d; fi;; "
        "*) r=\"/proc/$p/cwd/$d\"; d=\"$(readlink /proc/$p/cwd 2>/dev/null)/$d\";; esac; "
        "dlg_trb=\"${dlg_trb}$r${dlg_T}$d${dlg_T}auto\n\"; "
        "else if [ -d \"/proc/$p/root$tmp\" ]; then r=\"/proc/$p/root$tmp\"; else r=$tmp; fi; "
        f"for b in $(ls -1td -- \"$r\"/torchelastic_* 2>/dev/null | head -n {TORCHRUN_BASES}); "
        "do dlg_trb=\"${dlg_trb}$b${dlg_T}$tmp/${b##*/}${dlg_T}host\n\"; done; fi; "
        "done; echo \"torchrun_live $dlg_tr\""
    )


def _helpers() -> str:
    """dlg_add SOURCE SCOPE READ SHOW: one candidate file (printed, listed once);
    dlg_each LIST SOURCE SCOPE: dlg_add for each line of LIST (read = show)."""
    network = "|".join(NETWORK_FS)
    return (
        "dlg_list=; dlg_seen=; dlg_n=0; dlg_more=0; "
        "dlg_add() { "
        "if [ ! -e \"$3\" ]; then echo \"unreadable $1 missing $4\"; return; fi; "
        "if [ ! -f \"$3\" ]; then echo \"unreadable $1 not-regular $4\"; return; fi; "
        "if [ ! -r \"$3\" ]; then echo \"unreadable $1 permission $4\"; return; fi; "
        "_s=$(timeout 5 stat -L -c '%d:%i %s %Y' -- \"$3\" 2>/dev/null) "
        "|| { echo \"unreadable $1 stat-failed $4\"; return; }; "
        "set -- \"$1\" \"$2\" \"$3\" \"$4\" $_s; "
        "case \" $dlg_seen \" in *\" $5 \"*) return;; esac; dlg_seen=\"$dlg_seen $5\"; "
        f"if [ \"$dlg_n\" -ge {MAX_FILES} ]; then dlg_more=$((dlg_more + 1)); return; fi; "
        "dlg_n=$((dlg_n + 1)); "
        "_fs=$(timeout 5 stat -f -L -c %T -- \"$3\" 2>/dev/null | head -n 1 "
        "| tr -c 'A-Za-z0-9/._\\n-' '_'); _fs=${_fs:-?}; _sc=$2; "
        f"if [ \"$_sc\" = auto ]; then case \"$_fs\" in {network}) _sc=job;; *) _sc=host;; "
        "esac; fi; "
        "_age=?; [ \"$dlg_now\" -gt 0 ] && _age=$((dlg_now - $7)); "
        "echo \"file $dlg_n $1 $_sc $6 $_age $_fs $4\"; "
        # an earlier run's: written before the job started, or an operator's file (no job
        # start known) not written within the window
        "_st=-; if [ \"$dlg_since\" -gt 0 ]; then [ \"$7\" -lt \"$dlg_since\" ] && _st=before-job; "
        "elif [ \"$1\" = param ] && [ \"$_age\" != '?' ] && [ \"$_age\" -gt \"$dlg_window\" ]; "
        "then _st=old; fi; [ \"$_st\" = - ] || echo \"stale $dlg_n $_st\"; "
        "dlg_list=\"$dlg_list$dlg_n$dlg_T$_sc$dlg_T$_st$dlg_T$3\n\"; }; "
        "dlg_each() { _eo=$IFS; IFS='\n'; set -f; for _f in $1; do IFS=$_eo; set +f; "
        "dlg_add \"$2\" \"$3\" \"$_f\" \"$_f\"; done; IFS=$_eo; set +f; }; "
    )


def _fd_files() -> str:
    return ("_o=$IFS; IFS='\n'; set -f; for e in $dlg_cand; do IFS=$_o; set +f; "
            "s=${e%%$dlg_T*}; r=${e#*$dlg_T}; sc=${r%%$dlg_T*}; r=${r#*$dlg_T}; "
            "rp=${r%%$dlg_T*}; sp=${r#*$dlg_T}; dlg_add \"$s\" \"$sc\" \"$rp\" \"$sp\"; "
            "done; IFS=$_o; set +f; ")


def _torchrun_files(window: int) -> str:
    """The newest attempt of the newest run under each torchrun base (error.json first: the
    failed worker's exception; then stderr, then stdout)."""
    default = (f"if [ \"$dlg_tr\" = 0 ]; then f=$(find /tmp -maxdepth 1 -type d "
               f"-name 'torchelastic_*' -mmin -{int(window)} 2>/dev/null | head -n 64); "
               "if [ -n \"$f\" ]; then for b in $(ls -1td -- $f 2>/dev/null "
               f"| head -n {TORCHRUN_BASES}); do "
               "dlg_trb=\"${dlg_trb}$b${dlg_T}$b${dlg_T}host\n\"; done; fi; fi; ")
    walk = ("_o=$IFS; IFS='\n'; set -f; for e in $dlg_trb; do IFS=$_o; set +f; "
            "b=${e%%$dlg_T*}; r=${e#*$dlg_T}; sw=${r%%$dlg_T*}; sc=${r#*$dlg_T}; "
            "rd=$(ls -1td -- \"$b\"/*/ 2>/dev/null | head -n 1); "
            "[ -n \"$rd\" ] || { echo \"nomatch torchrun $sw\"; continue; }; "
            "at=$(ls -1d -- \"$rd\"attempt_* 2>/dev/null | awk '{ n = $0; "
            "sub(/.*attempt_/, \"\", n); print (n + 0) \"\\t\" $0 }' | sort -n | tail -n 1 "
            "| cut -f2-); "
            "[ -n \"$at\" ] || { echo \"nomatch torchrun $sw\"; continue; }; "
            "for n in error.json stderr.log stdout.log; do for f in \"$at\"/*/\"$n\"; do "
            "[ -f \"$f\" ] && [ -s \"$f\" ] && dlg_add torchrun \"$sc\" \"$f\" \"$sw${f#\"$b\"}\"; "
            "done; done; done; IFS=$_o; set +f; ")
    return default + walk


def _param_files(globs: Sequence[str]) -> str:
    return "".join(f"dlg_l=$(ls -1td -- {glob_word(g)} 2>/dev/null | head -n {GLOB_FILES}); "
                   "if [ -n \"$dlg_l\" ]; then dlg_each \"$dlg_l\" param auto; "
                   f"else echo {_q('nomatch param ' + g)}; fi; " for g in globs)


def _number(value: Any) -> float | None:
    if not isinstance(value, int | float) or isinstance(value, bool) or value <= 0:
        return None
    return float(value)


def files_section(params: Mapping[str, Any]) -> str:
    window = _number(params.get("window_minutes")) or WINDOW_MINUTES
    start = _number(params.get("job_start_epoch"))
    since = max(0, int(start) - STALE_SLACK_S) if start else 0
    return (f"dlg_since={since}; dlg_window={int(window * 60)}; "
            + _helpers() + _fd_files() + _torchrun_files(int(window))
            + slurm_files(string_list(params.get("slurm_output")),
                           _str(params.get("slurm_batch_host")),
                           string_list(params.get("slurm_nodes"), MAX_NODES))
            + _param_files(string_list(params.get("log")))
            + "[ \"$dlg_more\" -gt 0 ] && echo \"more $dlg_more\"; true")


def lines_section(ere: str) -> str:
    """Each listed file's tail grepped; "lines": this host's lines, $dlg_other the rest."""
    # the cutoff as a stamp in UTC, LOCAL_SPREAD_S earlier (GNU and busybox date -d @N; none
    # where date cannot: then no line is judged by its stamp)
    cut = ("if [ \"$dlg_since\" -gt 0 ]; then dlg_c=$dlg_since; "
           "elif [ \"$dlg_now\" -gt 0 ]; then dlg_c=$((dlg_now - dlg_window)); else dlg_c=0; fi; "
           f"dlg_old=; [ \"$dlg_c\" -gt {LOCAL_SPREAD_S} ] && dlg_old=$(date -u "
           f"-d \"@$((dlg_c - {LOCAL_SPREAD_S}))\" '+%Y-%m-%d %H:%M:%S' 2>/dev/null); ")
    return (
        cut + f"dlg_ere={_q(ere)}; dlg_other=; dlg_stale=; "
        "_o=$IFS; IFS='\n'; set -f; for e in $dlg_list; do IFS=$_o; set +f; "
        "i=${e%%$dlg_T*}; r=${e#*$dlg_T}; sc=${r%%$dlg_T*}; r=${r#*$dlg_T}; "
        "st=${r%%$dlg_T*}; rp=${r#*$dlg_T}; "
        f"out=$(timeout 10 tail -c {TAIL_BYTES} -- \"$rp\" 2>/dev/null | tail -n {TAIL_LINES} "
        f"| grep -aE -e \"$dlg_ere\" -e {_q(CONTEXT_ERE)} | grep -av '^=== diag:' "
        f"| cut -c1-{LINE_CHARS} | awk -v i=\"$i\" -v sc=\"$sc\" -v me=\"$dlg_short\" "
        f"-v H={HEAD_KEEP} -v T={TAIL_KEEP} -v old=\"$dlg_old\" -v STAMP={_q(STAMP_ERE)} "
        f"{_q(_CLASSIFY_AWK)}); "
        "[ -n \"$out\" ] || continue; "
        "if [ \"$st\" != - ]; then dlg_stale=\"$dlg_stale$(printf '%s\\n' \"$out\" "
        "| sed -n 's/^[hoxs] //p')\n\"; continue; fi; "
        "s=$(printf '%s\\n' \"$out\" | sed -n 's/^s //p'); "
        "if [ -n \"$s\" ]; then dlg_stale=\"$dlg_stale--- file $i\n$s\n\"; fi; "
        "printf '%s\\n' \"$out\" | sed -n 's/^[ho] //p'; "
        "x=$(printf '%s\\n' \"$out\" | sed -n 's/^x //p'); "
        "if [ -n \"$x\" ]; then dlg_other=\"$dlg_other--- file $i\n$x\n\"; fi; "
        "done; IFS=$_o; set +f; true"
    )


def others_section() -> str:
    return "printf '%s' \"$dlg_other\""


def stale_section() -> str:
    """The lines of files of an earlier run (kept in the facts, never the job stream)."""
    return "printf '%s' \"$dlg_stale\""


def string_list(value: Any, limit: int = MAX_PATTERNS) -> list[str]:
    """A param that is one string or a list of strings, as a list (blank entries dropped)."""
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list | tuple):
        return []
    return [str(v).strip() for v in value if isinstance(v, str | int) and str(v).strip()][:limit]


def _str(value: Any) -> str | None:
    return value.strip() if isinstance(value, str) and value.strip() else None
