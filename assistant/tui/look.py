"""How severities, host states and host lists look, in one place so every screen agrees.

Styles use the sixteen ANSI colour names: Textual maps them through the theme's ANSI palette
(a darker yellow on a light background), so one style reads in both light and dark themes.
"""

from __future__ import annotations

from collections.abc import Iterable

from rich.text import Text

from probes.hostfold import fold_counted
from probes.model import SEVERITY_RANK

from .safe_text import host_line

SEVERITY_STYLE = {"critical": "bold red", "error": "red", "warning": "yellow", "info": "cyan"}
STATE_STYLE = {"ok": "green", "pending": "dim", "cancelled": "magenta", "parse-error": "yellow"}
KIND_MARK = {"probe": "probe", "question": "ask", "action": "action", "conclusion": "end"}


def severity_text(severity: str, width: int = 0) -> Text:
    """The severity word, coloured; padded to *width* for table columns."""
    return Text(severity.ljust(width), style=SEVERITY_STYLE.get(severity, ""))


def severity_rank(severity: str) -> int:
    return SEVERITY_RANK.get(severity, -1)


def state_style(state: str) -> str:
    """Green for ok, dim for pending, red for every way a host can fail to answer."""
    return STATE_STYLE.get(state, "red")


def folded(hosts: Iterable[str], style: str = "") -> Text:
    """``gpu[001-031] (31)`` as safe text: host names come from inventories and scenarios."""
    return host_line(fold_counted(hosts), style)
