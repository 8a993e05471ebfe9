"""Slurm's output filename patterns for the ``logs`` component's script (probes/logs_script.py):
the StdOut/StdErr patterns of a job (``man sbatch``, "filename pattern") expanded on the host,
%N, %n and %t from what the host knows, job fields refused when the client left them."""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence

GLOB_FILES = 8  # newest files taken from one glob (also the --logs globs')
MAX_NODES = 4096


def _q(text: str) -> str:
    return shlex.quote(text)


_SPEC = re.compile(r"%(\d*)([%A-Za-z])")


def slurm_word(pattern: str) -> tuple[str, str, bool] | None:
    """A Slurm filename pattern as (shell word, shown pattern, names this node), with %N the
    host's short name, %n its node id and %t each of its task ids (``$dlg_nid``/``$dlg_t``,
    set by the caller; ``*`` when unknown), %% a "%". None when a job field is left unexpanded
    (%j, %x, ...: the client expands those; a glob for them could match other jobs' files).

    Slurm's rules (``expand_stdio_fields`` in src/common/print_fields.c): a backslash anywhere
    turns expansion off (backslashes removed); a number between % and the letter zero-pads;
    an unknown letter stays as written.
    """
    if "\\" in pattern:
        literal = pattern.replace("\\", "")
        return _q(literal), literal, False
    word: list[str] = []
    shown: list[str] = []
    per_node = False
    pos = 0
    for m in _SPEC.finditer(pattern):
        literal = pattern[pos:m.start()]
        if literal:
            word.append(_q(literal))
            shown.append(literal)
        pos = m.end()
        width, letter = m.group(1), m.group(2)
        pad = min(int(width), 10) if width else 0
        if letter == "%":
            word.append("%")
            shown.append("%")
        elif letter == "N":
            word.append('"$dlg_raw"')
            shown.append("%N")
            per_node = True
        elif letter in ("n", "t"):
            var = "dlg_nid" if letter == "n" else "dlg_t"
            word.append(f'$(printf %0{pad}d "${var}")' if pad else f'"${var}"')
            shown.append(f"%{letter}")
            per_node = True
        elif letter in "AabJjrSsux":
            return None
        else:
            word.append(_q(m.group(0)))
            shown.append(m.group(0))
    if pattern[pos:]:
        word.append(_q(pattern[pos:]))
        shown.append(pattern[pos:])
    return "".join(word), "".join(shown), per_node


def _slurm_listing(word: str, scope: str, shown: str) -> str:
    return (f"dlg_l=$(ls -1td -- {word} 2>/dev/null | head -n {GLOB_FILES}); "
            f"if [ -n \"$dlg_l\" ]; then dlg_each \"$dlg_l\" slurm {scope}; "
            f"else echo {_q('nomatch slurm ' + shown)}; fi")


def slurm_files(patterns: Sequence[str], batch_host: str | None,
                 nodes: Sequence[str]) -> str:
    if not patterns:
        return ""
    parts = ["dlg_nid=$dlg_nodeid; "]
    if nodes:  # %n from the job's node list, when no process told its SLURM_NODEID
        listed = " ".join(_q(n.lower()) for n in nodes[:MAX_NODES])
        parts.append("if [ -z \"$dlg_nid\" ]; then i=0; for n in "
                     f"{listed}; do [ \"$n\" = \"$dlg_short\" ] && dlg_nid=$i; "
                     "i=$((i + 1)); done; fi; ")
    for pattern in patterns:
        built = slurm_word(pattern)
        if built is None:
            parts.append(f"echo {_q('skipped slurm unexpanded ' + pattern)}; ")
            continue
        word, shown, per_node = built
        if batch_host:  # the batch step's one file: every node's lines, unless one node
            scope = "host" if len(nodes) == 1 else "job"
        else:
            scope = "host" if per_node else "job"
        known = _slurm_listing(word, scope, shown)
        if "$dlg_t" in word:
            known = f"for dlg_t in $dlg_procid; do {known}; done"
        need = [test for var, test in (("$dlg_nid", '[ -n "$dlg_nid" ]'),
                                       ("$dlg_t", '[ -n "$dlg_procid" ]')) if var in word]
        if need:  # unknown ids: any node's or task's file (scope job)
            guess = re.sub(r'"\$dlg_(?:nid|t)"|\$\(printf %0\d+d "\$dlg_(?:nid|t)"\)', "*", word)
            parts.append(f"if {' && '.join(need)}; then {known}; "
                         f"else {_slurm_listing(guess, 'job', shown)}; fi; ")
        else:
            parts.append(known + "; ")
    body = "".join(parts)
    if batch_host:  # read on every node (a shared file system); missing matters on this one
        b = batch_host.strip().lower()
        body = ("dlg_b=" + _q(b) + "; "
                "if [ \"$dlg_short\" = \"${dlg_b%%.*}\" ] || [ \"$(printf '%s' \"$dlg_host\" "
                "| tr 'A-Z' 'a-z')\" = \"$dlg_b\" ]; then echo 'batch_host yes'; "
                "else echo 'batch_host no'; fi; " + body)
    return body
