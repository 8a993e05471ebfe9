"""Fold identical results for humans, like ``clush -b`` / ``dshbak -c``.

512 copies of the same driver version are one line of information; the two hosts that differ
are the finding. Hosts are grouped by (state, exit status, output) — or (state, reason) for
hosts that could not be probed — and each group is headed by its folded host list
(``gpu[001-031] (31)``), so an 80x24 terminal shows the fleet's answer at a glance.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from assistant.fleet.transport import TRANSPORT_STATES, CommandResult
from probes.hostfold import fold_counted, fold_hosts

RULE = "-" * 15  # what clush -b prints


@dataclass
class Group:
    """Hosts that gave the same answer."""

    hosts: list[str]
    state: str
    stdout: str = ""
    stderr: str = ""
    exit_status: int | None = None
    reason: str = ""

    @property
    def header(self) -> str:
        """``gpu[001-031] (31)``, plus what is not ok about the group."""
        text = fold_counted(self.hosts)
        if self.state == "ok" and self.exit_status not in (0, None):
            text += f" exit {self.exit_status}"
        return text

    @property
    def body(self) -> str:
        """The output (stdout, then stderr) — or, for hosts not probed, ``state: reason``."""
        if self.state != "ok":
            return f"{self.state}: {self.reason}" if self.reason else self.state
        body = self.stdout
        if self.stderr:
            body += ("" if not body or body.endswith("\n") else "\n") + self.stderr
        if self.reason:  # e.g. "killed by signal 9"
            body += ("" if not body or body.endswith("\n") else "\n") + f"[{self.reason}]"
        return body


def fold(results: Mapping[str, CommandResult], *, include_stderr: bool = True) -> list[Group]:
    """Group hosts with identical results. Order: answered groups, largest first (the fleet
    majority, then the outliers), then the hosts that could not be probed, by state."""
    groups: dict[tuple[object, ...], Group] = {}
    for host, result in results.items():
        if result.state == "ok":
            stderr = result.stderr if include_stderr else ""
            key: tuple[object, ...] = ("ok", result.exit_status, result.stdout, stderr,
                                       result.reason)
            group = groups.setdefault(key, Group([], "ok", result.stdout, stderr,
                                                 result.exit_status, result.reason))
        else:
            key = (result.state, result.reason)
            group = groups.setdefault(key, Group([], result.state, reason=result.reason))
        group.hosts.append(host)
    order = {state: i for i, state in enumerate(TRANSPORT_STATES)}
    return sorted(groups.values(),
                  key=lambda g: (g.state != "ok", order.get(g.state, 99), -len(g.hosts),
                                 fold_hosts(g.hosts)))


def format_folded(results: Mapping[str, CommandResult], *, include_stderr: bool = True) -> str:
    """The ``clush -b`` style text: a ruled header per group, then its output::

        ---------------
        gpu[001-030] (30)
        ---------------
        5.15.0-105-generic
        ---------------
        gpu031 (1)
        ---------------
        unreachable: connection refused
    """
    lines: list[str] = []
    for group in fold(results, include_stderr=include_stderr):
        lines += [RULE, group.header, RULE]
        lines.extend(group.body.rstrip("\n").splitlines())
    return "\n".join(lines) + ("\n" if lines else "")


def summarize(results: Mapping[str, CommandResult]) -> str:
    """One line for a status bar: ``30 ok, 1 unreachable, 1 timeout``."""
    counts: dict[str, int] = {}
    for result in results.values():
        counts[result.state] = counts.get(result.state, 0) + 1
    order = {state: i for i, state in enumerate(TRANSPORT_STATES)}
    return ", ".join(f"{n} {state}" for state, n in
                     sorted(counts.items(), key=lambda kv: order.get(kv[0], 99)))
