"""The evidence sweep: every cheap, passive component in one round trip per host.

Every walk starts here (docs/architecture.md, "Evidence first"). The components are ordinary
probes marked ``sweep: true`` in probes/catalog.yaml; their scripts run *concurrently* on the
host, each in a shell of its own with its output in a file, under one time limit for all, and
come back in one answer::

    === diag:probe gpu
    ...the gpu probe's sectioned output...
    === diag:probe-rc gpu 0
    === diag:probe nvlink
    ...what it printed before the limit...
    === diag:probe-timeout nvlink 25

A component that hangs (an ``nvidia-smi`` stuck in a wedged driver) costs only itself: the
others' output still arrives, and its partial output names the section that hung. Before it is
ended, the state of each of its processes is printed (``ps``: pid, state, seconds it has run,
kernel wait channel, command), one line each, twice a second apart (the first time-out's
look is taken for every component that timed out, before any is ended)::

    === diag:probe-stuck gpu 4711 D 25 - nvidia-smi
    === diag:probe-stuck gpu --- again
    === diag:probe-stuck gpu 4711 D 26 - nvidia-smi

because a time-out alone does not say whether the command was blocked in the kernel (state D:
a wedged driver or a hung mount, which no amount of waiting ends) or only slow (runnable or
sleeping on a host whose CPUs are saturated). Where the
host cannot make a private temporary directory (a full or read-only /tmp is itself a fault the
sweep should still see), the components run one after the other instead, bounded by the
transport's own time limit.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from probes.hangstate import AGAIN, AGAIN_AFTER_S

MARK = "=== diag:probe"
_LINE = re.compile(r"^=== diag:probe(-rc|-timeout)? ([a-z0-9-]+)(?: (-?\d+))?\s*$")
_STUCK = re.compile(r"^=== diag:probe-stuck ([a-z0-9-]+) (\d+ \S+ .*?|--- again)\s*$")


@dataclass(frozen=True)
class Part:
    """One component's share of a host's sweep output."""

    text: str
    rc: int | None = None
    timed_out: bool = False
    # A timed-out component's processes as ps printed them when the limit came ("PID STAT
    # ELAPSED WCHAN COMM"); empty where ps is missing or the component finished.
    stuck: tuple[str, ...] = ()


def script(components: Sequence[tuple[str, str]], limit_s: int,
           first: Collection[str] = ()) -> str:
    """The host-side script running every (name, script) component concurrently; those named
    in *first* (they measure the host's own load) run alone before the others start, inside
    the same limit."""
    assign = "\n".join(f"diag_s{i}={shlex.quote(text)} diag_r{i}=" for i, (_, text) in
                       enumerate(components))
    early = [i for i, (name, _) in enumerate(components) if name in first]
    late = [i for i in range(len(components)) if i not in early]

    def start(indices: Sequence[int]) -> str:
        return "\n".join(
            f'  sh -c "$diag_s{i}" >"$diag_d/{i}" 2>&1 </dev/null &\n  diag_p{i}=$!'
            for i in indices)

    def wait(indices: Sequence[int]) -> str:
        # One blocking wait per component, cut short by a watcher's USR1 at the limit: a
        # polling loop here started a date and a sleep ten times a second on every host (a
        # fifth of a healthy sweep's process starts). The watcher signals again every second
        # until it is ended (a signal that lands between a check and its wait is lost; a
        # loaded host showed it). Each status is kept as it is reaped (a reaped child cannot
        # be waited for again); the watcher's own sleep ends with it.
        waits = "\n".join(
            f'    [ -z "$diag_late" ] && [ -z "$diag_r{i}" ] && {{ wait "$diag_p{i}"; '
            f'diag_x=$?; [ -z "$diag_late" ] && diag_r{i}=$diag_x; }}'
            for i in indices)
        return f"""  diag_left=$(( diag_end - $(date +%s) ))
  if [ "$diag_left" -gt 0 ] && [ -z "$diag_late" ]; then
    ( trap 'kill "$diag_z" 2>/dev/null; exit 0' TERM
      sleep "$diag_left" & diag_z=$!; wait "$diag_z"
      while kill -USR1 "$diag_main"; do sleep 1 & diag_z=$!; wait "$diag_z"; done ) \\
      >/dev/null 2>&1 </dev/null &
    diag_w=$!
{waits}
    kill "$diag_w" 2>/dev/null; wait "$diag_w" 2>/dev/null
  fi"""

    collect = "\n".join(
        f'  echo "{MARK} {name}"; cat "$diag_d/{i}" 2>/dev/null; echo\n'
        f'  if [ -n "$diag_r{i}" ]; then echo "{MARK}-rc {name} $diag_r{i}"; '
        f'elif kill -0 "$diag_p{i}" 2>/dev/null; then echo "{MARK}-timeout {name} {limit_s}"; '
        f'diag_stuck "$diag_p{i}" {name}; diag_kill "$diag_p{i}"; '
        f'else wait "$diag_p{i}"; echo "{MARK}-rc {name} $?"; fi'
        for i, (name, _) in enumerate(components))
    serial = "\n".join(
        f'  echo "{MARK} {name}"; sh -c "$diag_s{i}" 2>&1 </dev/null; diag_rc=$?; echo; '
        f'echo "{MARK}-rc {name} $diag_rc"'
        for i, (name, _) in enumerate(components))
    return f"""{assign}
diag_kill() {{
  command -v pkill >/dev/null 2>&1 && pkill -KILL -P "$1" 2>/dev/null
  kill -KILL "$1" 2>/dev/null
}}
diag_looked=
diag_look() {{
  [ -n "$diag_looked" ] && return 0
  diag_looked=1
  diag_ps > "$diag_d/ps1"; sleep {AGAIN_AFTER_S}; diag_ps > "$diag_d/ps2"
}}
diag_ps() {{
  ps -e -o pid= -o ppid= -o stat= -o etimes= -o wchan:40= -o comm= 2>/dev/null
}}
diag_stuck() {{
  diag_look
  diag_tree "$1" "$2" < "$diag_d/ps1"
  echo "{MARK}-stuck $2 {AGAIN}"
  diag_tree "$1" "$2" < "$diag_d/ps2"
}}
diag_tree() {{
  awk -v root="$1" -v name="$2" '{{ pid[NR] = $1; up[NR] = $2; $2 = ""; row[NR] = $0 }}
    END {{ keep[root] = 1; grew = 1
      while (grew) {{ grew = 0; for (i = 1; i <= NR; i++)
        if ((up[i] in keep) && !(pid[i] in keep)) {{ keep[pid[i]] = 1; grew = 1 }} }}
      for (i = 1; i <= NR; i++) if (pid[i] in keep) {{ r = row[i]; gsub(/  +/, " ", r)
        print "{MARK}-stuck " name " " r }} }}'
}}
diag_d=$(mktemp -d "${{TMPDIR:-/tmp}}/diag-sweep.XXXXXX" 2>/dev/null) || diag_d=
if [ -n "$diag_d" ] && [ -d "$diag_d" ]; then
  trap 'rm -rf "$diag_d"' EXIT
  diag_main=$$ diag_late=
  trap 'diag_late=1' USR1
  diag_end=$(( $(date +%s) + {int(limit_s)} ))
{start(early) + chr(10) + wait(early) if early else ""}
{start(late)}
{wait(range(len(components)))}
{collect}
else
  echo "{MARK}-serial"
{serial}
fi
"""


def compose(parts: Sequence[tuple[str, Part]]) -> str:
    """A sweep output as the host prints it (what a replayed scenario answers)."""
    out = []
    for name, part in parts:
        body = part.text if not part.text or part.text.endswith("\n") else part.text + "\n"
        out.append(f"{MARK} {name}\n{body}\n")
        if part.timed_out:
            out.append(f"{MARK}-timeout {name} {part.rc if part.rc is not None else 0}\n")
            out.extend(f"{MARK}-stuck {name} {row}\n" for row in part.stuck)
        else:
            out.append(f"{MARK}-rc {name} {part.rc if part.rc is not None else 0}\n")
    return "".join(out)


def split(text: str) -> dict[str, Part]:
    """A host's sweep output back into its components. A component whose end mark never came
    (the host's output was cut) is kept as timed out with what it printed."""
    parts: dict[str, Part] = {}
    name: str | None = None
    lines: list[str] = []
    for line in text.splitlines():
        mark = _LINE.match(line)
        if not mark:
            stuck = _STUCK.match(line) if name is None else None
            if stuck and stuck.group(1) in parts:
                part = parts[stuck.group(1)]
                parts[stuck.group(1)] = Part(part.text, part.rc, part.timed_out,
                                             (*part.stuck, stuck.group(2)))
            elif name is not None:
                lines.append(line)
            continue
        kind, which, number = mark.groups()
        if kind is None:
            if name is not None:  # the previous one never ended
                parts[name] = Part(_joined(lines), None, True)
            name, lines = which, []
        elif name is not None and name == which:
            rc = int(number) if number is not None else None
            parts[name] = Part(_joined(lines), None if kind == "-timeout" else rc,
                               kind == "-timeout")
            name, lines = None, []
    if name is not None:
        parts[name] = Part(_joined(lines), None, True)
    return parts


def _joined(lines: list[str]) -> str:
    while lines and not lines[-1].strip():  # the separating echo
        lines.pop()
    return "\n".join(lines) + ("\n" if lines else "")
