"""Probe progress, live per host: ok / failed / pending counts, failures folded by state.

Fed one host at a time from the ProbeStarted/ProbeFinished events (128 hosts are 256 events
per probe, arriving gathered in ``ProbeEvents`` messages); each only updates a dict. Painting
is throttled to ten times a second, and a relayout is asked for only when the number of lines
changes: on a two-core login node the fan-out's threads compete with the event loop for the
GIL, and a full relayout per frame is what turned into visible stalls (``bench/tui.py``).
"""

from __future__ import annotations

from rich.text import Text
from textual.widget import Widget

from ..look import folded, state_style
from ..safe_text import host_line

BAR = 20
PAINT_EVERY_S = 0.1
MAX_GROUPS = 4  # failure groups shown per probe; the rest are counted


class ProbeProgress(Widget):
    """Per probe: {host: (state, reason)}; state "pending" until the host answers."""

    DEFAULT_CSS = "ProbeProgress { height: auto; }"

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.probes: dict[str, dict[str, tuple[str, str]]] = {}
        self._dirty = False
        self._lines = 0
        self._shown = Text()

    def on_mount(self) -> None:
        self.set_interval(PAINT_EVERY_S, self.flush)

    def reset(self) -> None:
        self.probes = {}
        self.refresh_progress()

    def started(self, probe: str, host: str) -> None:
        self.probes.setdefault(probe, {})[host] = ("pending", "")
        self.refresh_progress()

    def finished(self, probe: str, host: str, state: str, reason: str) -> None:
        self.probes.setdefault(probe, {})[host] = (state, reason)
        self.refresh_progress()

    def cancel_pending(self) -> None:
        """After a cancel: whatever had not answered is cancelled (as the fan-out reports)."""
        for hosts in self.probes.values():
            for host, (state, _) in list(hosts.items()):
                if state == "pending":
                    hosts[host] = ("cancelled", "cancelled")
        self.refresh_progress()

    def counts(self, probe: str) -> tuple[int, int, int, int]:
        """(ok, failed, pending, cancelled) for *probe*: a cancelled host did not fail."""
        states = [s for s, _ in self.probes.get(probe, {}).values()]
        ok, pending, cancelled = (states.count(s) for s in ("ok", "pending", "cancelled"))
        return ok, len(states) - ok - pending - cancelled, pending, cancelled

    def refresh_progress(self) -> None:
        self._dirty = True  # painted by the next flush

    def flush(self) -> None:
        """Paint now if anything changed (the timer calls it; so does the screen at idle)."""
        if not self._dirty:
            return
        self._dirty = False
        self._shown = self.render_progress()
        lines = self._shown.plain.count("\n") + 1 if self._shown.plain else 0
        self.refresh(layout=lines != self._lines)
        self._lines = lines

    def render(self) -> Text:
        return self._shown

    def render_progress(self) -> Text:
        out = Text()
        for probe, hosts in self.probes.items():
            ok, failed, pending, cancelled = self.counts(probe)
            done = len(hosts) - pending
            filled = round(BAR * done / (len(hosts) or 1))
            if out:
                out.append("\n")
            out.append(f"{probe:<14}", style="bold")
            bar = "red" if failed else "magenta" if cancelled else "green"
            out.append("█" * filled, style=bar)
            out.append("░" * (BAR - filled), style="dim")
            out.append(f" {done}/{len(hosts)}\n  ")
            out.append(f"ok {ok}", style="green")
            out.append("  ")
            out.append(f"failed {failed}", style="red" if failed else "dim")
            out.append("  ")
            out.append(f"pending {pending}", style="dim")
            if cancelled:
                out.append(f"  cancelled {cancelled}", style="magenta")
            groups: dict[tuple[str, str], list[str]] = {}
            for host, (state, reason) in hosts.items():
                if state not in ("ok", "pending"):
                    groups.setdefault((state, reason), []).append(host)
            ordered = sorted(groups.items(), key=lambda kv: -len(kv[1]))
            for (state, reason), names in ordered[:MAX_GROUPS]:
                out.append("\n  ")
                out.append(f"{state:<12} ", style=state_style(state))
                out.append(folded(names, "bold"))
                if reason and reason != state:
                    out.append("  ")
                    out.append(host_line(reason[:200], "dim"))
            if len(ordered) > MAX_GROUPS:
                rest = sum(len(n) for _, n in ordered[MAX_GROUPS:])
                out.append(f"\n  … {len(ordered) - MAX_GROUPS} more groups ({rest} hosts)",
                           style="dim")
        return out
