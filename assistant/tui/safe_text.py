"""Text from hosts is shown as text: the one door every host-derived string goes through.

Probe output, finding messages, evidence, host names and failure reasons come from machines we
are troubleshooting — possibly broken, possibly hostile. Two things must never happen to them:
Rich/Textual markup in them being interpreted (``[bold]x[/]`` would change the display, and a
``[link=...]`` could lie about where it points), and terminal escapes reaching the terminal
(``\\x1b[2J`` would clear an operator's screen over SSH, a bidi override can reorder what they
read). So control and format characters are made *visible* (``\\x1b`` becomes ``␛``) and the
result is wrapped in a ``rich.text.Text``, which is never parsed as markup.
"""

from __future__ import annotations

from collections.abc import Iterable

from rich.text import Text

from assistant.hosttext import NEWLINE, visible

__all__ = ["NEWLINE", "host_line", "host_text", "join", "visible"]


def host_text(text: object, style: str = "", *, newlines: bool = True) -> Text:
    """A ``Text`` of host-derived *text*: escapes visible, markup never parsed."""
    return Text(visible(text, newlines=newlines), style=style)


def host_line(text: object, style: str = "") -> Text:
    """One-line variant for table cells and labels: newlines shown as ``␤``."""
    return host_text(text, style, newlines=False)


def join(parts: Iterable[Text | str], separator: str = "") -> Text:
    """Join texts without ever parsing a plain ``str`` part as markup."""
    return Text(separator).join(p if isinstance(p, Text) else Text(p) for p in parts)
