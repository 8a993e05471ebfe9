"""The incident a walk is recorded in, and the offer to close it with the walk's conclusion.

A walk joins the open incident it belongs to (same Slurm job, or same runbook on overlapping
hosts) or opens one; the operator should see which, and once the walk concludes, close the
incident with that conclusion as its root cause in one key — closed incidents are what time
to resolve is measured on. The store write runs in a worker thread, never on the UI's.
"""

from __future__ import annotations

from rich.text import Text
from textual import work
from textual.widgets import Static

from assistant.runbook import events as ev

from ..safe_text import host_line


class IncidentBar(Static):
    """One or two lines above the conclusion: the incident, why this walk is in it, and
    ``x`` to close it with the conclusion as root cause."""

    DEFAULT_CSS = """
    IncidentBar { height: auto; padding: 0 1; display: none; }
    """

    def __init__(self, **kwargs: object) -> None:
        super().__init__("", **kwargs)  # type: ignore[arg-type]
        self.incident = ""
        self.joined: str | None = None
        self.cause = ""
        self.closed = False

    @property
    def can_close(self) -> bool:
        return bool(self.incident and self.cause and not self.closed)

    def recorded(self, incident: str, joined: str | None) -> None:
        """The walk is recorded in *incident* (*joined*: why it joined an open one)."""
        self.incident, self.joined = incident, joined
        self.display = True
        self._show()

    def concluded(self, event: ev.ConclusionReached) -> None:
        """The walk concluded: offer its conclusion as the incident's root cause."""
        self.cause = f"{event.title}: {event.cause}" if event.cause else event.title
        self._show()

    def close_incident(self) -> None:
        if self.can_close:
            self._close(self.incident, self.cause)

    @work(thread=True, exclusive=True, group="incident")
    def _close(self, incident: str, cause: str) -> None:
        from assistant.tui.hooks import close_incident

        try:
            close_incident(incident, cause)
        except Exception as exc:  # a busy store: say so, the walk is unharmed
            self.app.call_from_thread(self.notify, f"incident {incident} not closed: {exc}",
                                      severity="warning", markup=False)
            return
        self.app.call_from_thread(self._done)

    def _done(self) -> None:
        self.closed = True
        self._show()
        self.screen.refresh_bindings()  # the footer's "x" goes
        self.notify(f"incident {self.incident} closed with this conclusion as its root cause",
                    markup=False)

    def _show(self) -> None:
        line = Text.assemble(("Incident ", "dim"), (self.incident, "bold"))
        if self.closed:
            line.append("  closed", style="bold green")
        elif self.joined:
            line.append("  joined: ", style="dim")
            line.append_text(host_line(self.joined))
        else:
            line.append("  new", style="dim")
        if self.can_close:
            line.append("\n")
            line.append("x", style="bold")
            line.append(" closes it with this conclusion as its root cause", style="dim")
        self.update(line)
