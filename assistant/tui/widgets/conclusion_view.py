"""The conclusion: cause, fix, the evidence behind it, and the KB articles to read next
(Enter opens one). Export keys live on the walk screen; this only shows."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from assistant.runbook import events as ev

from .. import messages as msg
from ..look import SEVERITY_STYLE, folded, severity_text
from ..safe_text import host_line


def conclusion_title(event: ev.ConclusionReached) -> Text:
    return Text.assemble(("Conclusion: ", "dim"),
                         (event.title, "bold " + SEVERITY_STYLE.get(event.severity, "")),
                         "  ", severity_text(event.severity))


def conclusion_text(event: ev.ConclusionReached) -> Text:
    out = Text()
    out.append("Cause\n", style="bold underline")
    out.append(event.cause.strip())
    out.append("\n\nFix\n", style="bold underline")
    out.append(event.fix.strip())
    if event.evidence:
        out.append("\n\nEvidence\n", style="bold underline")
        for i, finding in enumerate(event.evidence):
            if i:
                out.append("\n")
            out.append_text(severity_text(finding.severity, 9))
            out.append(f"{finding.code} ", style="bold")
            out.append_text(folded(finding.hosts))
            out.append("\n  ")
            out.append_text(host_line(finding.message, "dim"))
            out.append_text(_reasons(finding.evidence.get("reasons")))
    return out


def _reasons(reasons: object, limit: int = 6) -> Text:
    """Why each host could not be probed (DNS, refused, hung in nvidia-smi...), one a line:
    the conclusion must carry the reason, not only how many hosts failed."""
    out = Text()
    if not isinstance(reasons, dict):
        return out
    items = list(reasons.items())
    for host, reason in items[:limit]:
        out.append("\n    ")
        out.append_text(host_line(str(host), "bold"))
        out.append(": ")
        out.append_text(host_line(str(reason), "dim"))
    if len(items) > limit:
        out.append(f"\n    ... and {len(items) - limit} more (findings table)", style="dim")
    return out


class ConclusionView(VerticalScroll):
    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.event: ev.ConclusionReached | None = None

    def compose(self) -> ComposeResult:
        # Title, then what to do with it (read, export), then cause/fix/evidence: at 80x24 the
        # actionable lines must not sit below the fold.
        yield Static(Text("No conclusion yet: walk on.", style="dim"), id="conclusion-title")
        yield Static(Text("Read (Enter opens)", style="dim"), id="kb-title")
        yield OptionList(id="kb-links")
        yield Static(id="export-hint")
        yield Static(id="conclusion-text")

    def on_mount(self) -> None:
        self.query_one("#kb-title").display = False
        self.query_one("#kb-links").display = False

    def show(self, event: ev.ConclusionReached, kb_titles: dict[str, str], hint: Text) -> None:
        self.event = event
        self.query_one("#conclusion-title", Static).update(conclusion_title(event))
        self.query_one("#conclusion-text", Static).update(conclusion_text(event))
        links = self.query_one("#kb-links", OptionList)
        links.clear_options()
        links.add_options(Option(Text.assemble((kb, "bold"), "  ", kb_titles.get(kb, "")), id=kb)
                          for kb in event.kb)
        links.display = bool(event.kb)
        if event.kb:
            links.highlighted = 0
        self.query_one("#kb-title").display = bool(event.kb)
        self.query_one("#export-hint", Static).update(hint)

    def clear(self) -> None:
        self.event = None
        self.query_one("#conclusion-title", Static).update(
            Text("No conclusion yet: walk on.", style="dim"))
        self.query_one("#conclusion-text", Static).update("")
        self.query_one("#kb-links", OptionList).clear_options()
        self.query_one("#kb-links").display = False
        self.query_one("#kb-title").display = False
        self.query_one("#export-hint", Static).update("")

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        if event.option.id:
            self.post_message(msg.ArticleChosen(event.option.id))
