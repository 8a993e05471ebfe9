"""The diag TUI: ``run_app`` is what ``diag`` and ``diag --demo`` call.

``DiagApp`` is deliberately thin: it owns the context (fleet, target, store hooks), opens
screens when messages ask for them (``RunbookChosen``, ``ArticleChosen``) or the registry's keys
are pressed, and closes the target at exit. Everything else lives in a screen or a widget.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from textual import events
from textual.app import App
from textual.binding import BindingType
from textual.widgets import Input

from assistant.kb import get_article
from assistant.runbook.library import RunbookError, get_runbook

from . import messages as msg
from . import registry
from .commands import DiagCommands
from .context import TUI_CONCURRENCY, DiagContext, FleetOptions
from .walk_driver import keep_gc_off_the_loop


class DiagApp(App[int]):
    CSS_PATH = Path(__file__).with_name("app.tcss")  # absolute: subclasses live elsewhere
    TITLE = "diag"
    COMMANDS = App.COMMANDS | {DiagCommands}
    BINDINGS: ClassVar[list[BindingType]] = registry.app_bindings()

    def __init__(self, ctx: DiagContext, *, still: bool = False,
                 theme: str | None = None,
                 resume: tuple[dict[str, Any], dict[str, Any]] | None = None) -> None:
        """*still*: no cursor blink and no animation, for snapshots (nothing moves).
        *resume*: a recorded walk (session, state) to open at once (``diag --resume``)."""
        super().__init__()
        self.ctx = ctx
        self.still = still
        self.resume = resume
        if theme:
            self.theme = theme
        if still:
            self.animation_level = "none"

    def on_mount(self) -> None:
        self.ctx.notice = self._notice
        if self.ctx.drill is not None:
            from .screens.drill import DrillScreen

            self.push_screen(DrillScreen(self.ctx, self.ctx.drill))
            return
        from .screens.home import HomeScreen

        self.push_screen(HomeScreen(self.ctx))
        if self.resume is not None:
            self.post_message(msg.ResumeRequested(*self.resume, self.ctx))

    def on_ready(self) -> None:
        # What start-up built (modules, runbooks, the KB, the first screen) lives as long as
        # the app: out of the cyclic collector's full passes, which hold the GIL while they
        # walk every object (walk_driver.keep_gc_off_the_loop says how long that was).
        keep_gc_off_the_loop()

    def _notice(self, line: str) -> None:
        """A walk's one-line note (the monitoring step's server trouble), from its thread."""
        try:
            self.call_from_thread(self.notify, line, title="monitoring", markup=False,
                                  timeout=10)
        except RuntimeError:  # already on the app's own thread
            self.notify(line, title="monitoring", markup=False, timeout=10)

    def on_unmount(self) -> None:
        self.ctx.close()

    def on_descendant_focus(self, event: events.DescendantFocus) -> None:
        if self.still and isinstance(event.widget, Input):
            event.widget.cursor_blink = False  # snapshots: a cursor that never blinks

    # --- opening screens -----------------------------------------------------------------------

    def action_open(self, name: str) -> None:
        entry = registry.entry(name)
        if entry.factory is None:  # home: the bottom of the stack
            while len(self.screen_stack) > 2:
                self.pop_screen()
            return
        screen = entry.factory(self.ctx)
        if type(self.screen) is not type(screen):
            self.push_screen(screen)

    def action_toggle_dark(self) -> None:
        self.theme = "textual-light" if self.current_theme.dark else "textual-dark"

    def on_runbook_chosen(self, message: msg.RunbookChosen) -> None:
        from .screens.walk import WalkScreen

        if self.ctx.target is None:
            self.notify(f"no hosts to walk against: {self.ctx.target_error}", severity="error",
                        markup=False)
            return
        try:
            runbook = get_runbook(message.runbook_id)
        except (KeyError, RunbookError) as exc:
            self.notify(str(exc), severity="error", markup=False)
            return
        self.push_screen(WalkScreen(self.ctx, runbook, message.symptom))

    def on_article_chosen(self, message: msg.ArticleChosen) -> None:
        from .screens.kb import KBScreen

        try:
            article = get_article(message.article_id)
        except KeyError as exc:
            self.notify(str(exc.args[0]), severity="error", markup=False)
            return
        self.push_screen(KBScreen(article))

    def on_incident_chosen(self, message: msg.IncidentChosen) -> None:
        from .screens.incident import IncidentScreen

        self.push_screen(IncidentScreen(self.ctx, message.incident_id))

    def on_resume_requested(self, message: msg.ResumeRequested) -> None:
        """A recorded walk continued here, over the hosts it used (its own context if the
        session's differ from this one's, closed when the walk screen goes)."""
        from assistant.walks import saved_runbook

        from .screens.walk import WalkScreen

        try:
            runbook = saved_runbook(message.saved, message.state)
        except (KeyError, RunbookError) as exc:
            self.notify(f"cannot resume: {exc}", severity="error", markup=False)
            return
        self.push_screen(WalkScreen(message.ctx, runbook, resume=(message.saved, message.state),
                                    owns_ctx=message.ctx is not self.ctx))

    def on_node_chosen(self, message: msg.NodeChosen) -> None:
        from .screens.node import NodeScreen

        self.push_screen(NodeScreen(self.ctx, message.host))


def run_app(*, hosts: str | None = None, inventory: str | None = None,
            scenario: str | None = None, transport: str | None = None,
            accept_new_host_keys: bool = False, connect_timeout: float = 5.0,
            concurrency: int | None = None, timeout: float | None = None,
            deadline: float = 120.0,
            demo: bool = False, theme: str | None = None,
            export_dir: Path | None = None, drill: str | None = None,
            resume: tuple[dict[str, Any], dict[str, Any]] | None = None, **more: Any) -> int:
    """Run the TUI until the operator quits; returns the exit code (0).

    Host options are the CLI's (DESIGN.md); *demo* replays ``fixtures/scenarios/demo``. A
    target that cannot be opened is not fatal: the home screen says why, the KB still works.
    *concurrency* None means the TUI's own default (``context.TUI_CONCURRENCY``: why there).
    *drill*: None for the ordinary TUI; a scenario name drills that scenario, "" a random one
    the trainee ($USER) has not drilled yet (docs/drills.md). A drill replays its scenario and
    records no incident; host options are ignored. *resume*: a recorded walk (session,
    state) opened at once, over the hosts its session recorded unless host options say
    otherwise (``diag --resume SESSION``).
    """
    if drill is not None:
        return run_drill(drill, theme=theme, export_dir=export_dir)
    options = FleetOptions(hosts=hosts, inventory=inventory, scenario=scenario,
                           transport=transport, accept_new_host_keys=accept_new_host_keys,
                           connect_timeout=connect_timeout,
                           concurrency=concurrency or TUI_CONCURRENCY,
                           timeout=timeout, deadline=deadline,
                           workers=more.pop("workers", None), **more)
    if resume is not None:
        options = options.resumed(resume[0].get("target"))
    app = DiagApp(DiagContext(options, demo=demo, export_dir=export_dir), theme=theme,
                  resume=resume)
    return app.run() or 0


def run_drill(name: str, *, theme: str | None = None, export_dir: Path | None = None) -> int:
    from .drill import drill_context

    app = DiagApp(drill_context(name, export_dir=export_dir), theme=theme)
    return app.run() or 0
