"""The conclusion: which hosts it accuses, what was done about it (and what was not), the
evidence, the KB articles to read next (Enter opens one), then the cause and the fix.

At 80x24 the lines an on-call engineer acts on come first: a conclusion that says "keep the
host drained" must show, above the fold, whether the drain ran and on which host it failed,
and the accused host's evidence. Export keys live on the walk screen; this only shows.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from assistant.runbook import events as ev
from assistant.runbook.report import undone
from probes.model import Finding

from .. import messages as msg
from ..look import SEVERITY_STYLE, folded, severity_rank, severity_text
from ..safe_text import host_line, join

EVIDENCE_SHOWN = 4  # findings listed above the fold; the Findings tab has them all


def conclusion_title(event: ev.ConclusionReached) -> Text:
    title = Text.assemble(("Conclusion: ", "dim"),
                          (event.title, "bold " + SEVERITY_STYLE.get(event.severity, "")))
    if event.hosts:
        title.append(" — ")
        title.append_text(folded(event.hosts, "bold"))
    title.append("  ")
    title.append_text(severity_text(event.severity))
    return title


def actions_text(actions: Iterable[Mapping[str, Any]]) -> Text:
    """What the walk did about it: each remediation, done or NOT done, host by host."""
    out = Text()
    for action in actions:
        if not action.get("command"):
            continue
        if out:
            out.append("\n")
        missing = undone(action)
        if missing is not None:
            hosts, why = missing
            out.append("NOT done: ", style="bold red")
            out.append_text(join([host_line(action["node"], "bold"), Text(" on "),
                                  folded(hosts), Text(f" ({why})")]))
        else:
            out.append("Done: ", style="bold green")
            out.append_text(join([host_line(action["node"], "bold"), Text(" on "),
                                  folded(action.get("hosts") or [])]))
        for host, result in (action.get("per_host") or {}).items():
            if result.get("state") == "done":
                continue
            out.append("\n  ")
            out.append_text(join([host_line(host, "bold"), Text(f" {result.get('state')}: "),
                                  host_line(result.get("detail") or "", "dim")]))
    return out


OUTCOME_STYLE = {"done": "bold green", "simulated": "bold magenta"}


def action_result_text(event: ev.ActionDecided) -> Text:
    """An action step's result: the outcome, then each host's (ok, or failed with why)."""
    out = Text.assemble(("Action ", "dim"), (event.outcome or "decided",
                                             OUTCOME_STYLE.get(event.outcome, "bold red")))
    out.append_text(host_line(f" — {event.result}" if not event.per_host else ""))
    for host, state, detail in event.per_host:
        out.append("\n  ")
        out.append_text(join([host_line(host, "bold"),
                              Text(f" {state}", style=OUTCOME_STYLE.get(state, "red")),
                              host_line(f": {detail}" if detail else "", "dim")]))
    return out


def evidence_text(evidence: Iterable[Finding], accused: Iterable[str]) -> Text:
    """The evidence, findings about the accused hosts first, one line each (no wrap)."""
    accused = set(accused)
    findings = sorted(evidence, key=lambda f: (not accused & set(f.hosts),
                                               -severity_rank(f.severity), f.code))
    out = Text(no_wrap=True, overflow="ellipsis")  # one line each; the tab has the rest
    if not findings:
        return out
    out.append("Evidence\n", style="bold underline")
    for i, finding in enumerate(findings[:EVIDENCE_SHOWN]):
        if i:
            out.append("\n")
        out.append_text(severity_text(finding.severity, 9))
        out.append(f"{finding.code} ", style="bold")
        out.append_text(host_line(finding.message, "dim"))
        out.append_text(_reasons(finding.evidence.get("reasons"), limit=4))
    if len(findings) > EVIDENCE_SHOWN:
        out.append(f"\n… {len(findings) - EVIDENCE_SHOWN} more in the Findings tab (f)",
                   style="dim")
    return out


def conclusion_text(event: ev.ConclusionReached) -> Text:
    out = Text()
    out.append("Cause\n", style="bold underline")
    out.append(event.cause.strip())
    out.append("\n\nFix\n", style="bold underline")
    out.append(event.fix.strip())
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
        # What the operator acts on first: who is accused, what was (not) done, the evidence;
        # then what to read or export; then the cause and fix in full.
        yield Static(Text("No conclusion yet: walk on.", style="dim"), id="conclusion-title")
        yield Static(id="conclusion-actions")
        yield Static(id="conclusion-evidence")
        yield Static(Text("Read (Enter opens)", style="dim"), id="kb-title")
        yield OptionList(id="kb-links")
        yield Static(id="export-hint")
        yield Static(id="conclusion-text")

    def on_mount(self) -> None:
        for part in ("#kb-title", "#kb-links", "#conclusion-actions", "#conclusion-evidence"):
            self.query_one(part).display = False

    def show(self, event: ev.ConclusionReached, kb_titles: dict[str, str], hint: Text) -> None:
        self.event = event
        self.query_one("#conclusion-title", Static).update(conclusion_title(event))
        for part, text in (("#conclusion-actions", actions_text(event.actions)),
                           ("#conclusion-evidence", evidence_text(event.evidence,
                                                                  event.hosts))):
            widget = self.query_one(part, Static)
            widget.update(text)
            widget.display = bool(text.plain)
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
        for part in ("#conclusion-text", "#conclusion-actions", "#conclusion-evidence"):
            self.query_one(part, Static).update("")
        for part in ("#conclusion-actions", "#conclusion-evidence"):
            self.query_one(part).display = False
        self.query_one("#kb-links", OptionList).clear_options()
        self.query_one("#kb-links").display = False
        self.query_one("#kb-title").display = False
        self.query_one("#export-hint", Static).update("")

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        if event.option.id:
            self.post_message(msg.ArticleChosen(event.option.id))
