"""Command palette (Ctrl-P): the registry's screens, every runbook to walk, every KB article
to read, and the light/dark switch. New screens appear here by being added to the registry."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from functools import partial
from typing import Protocol, cast

from textual.command import DiscoveryHit, Hit, Hits, Provider
from textual.message import Message

from assistant.match import shipped_index

from . import messages as msg
from . import registry


class _AppActions(Protocol):
    """What the palette asks of the app (its actions), without importing the app."""

    def action_open(self, name: str) -> None: ...

    def action_toggle_dark(self) -> None: ...

    def post_message(self, message: Message) -> bool: ...

Command = tuple[str, str, Callable[[], object]]  # (text, help, callback)


class DiagCommands(Provider):
    async def startup(self) -> None:
        # The index validates every runbook the first time: not on the event loop.
        index = await asyncio.to_thread(shipped_index)
        app = cast(_AppActions, self.app)
        commands: list[Command] = []
        for entry in registry.SCREENS:
            commands.append((f"Go to {entry.title}", entry.help,
                             partial(app.action_open, entry.name)))
        commands.append(("Toggle light/dark theme", "switch between textual-dark and "
                         "textual-light", app.action_toggle_dark))
        for doc in index.documents:
            if doc.type == "runbook":
                commands.append((f"Walk runbook: {doc.title} ({doc.id})", "start a walk",
                                 partial(app.post_message, msg.RunbookChosen(doc.id))))
        for doc in index.documents:
            if doc.type == "kb":
                commands.append((f"Read KB: {doc.title} ({doc.id})", "open the article",
                                 partial(app.post_message, msg.ArticleChosen(doc.id))))
        self.commands = commands

    async def discover(self) -> Hits:
        for text, help_text, callback in self.commands:
            yield DiscoveryHit(text, callback, help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for text, help_text, callback in self.commands:
            score = matcher.match(text)
            if score > 0:
                yield Hit(score, matcher.highlight(text), callback, text=text, help=help_text)
