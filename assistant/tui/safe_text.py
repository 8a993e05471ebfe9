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

import unicodedata
from collections.abc import Iterable

from rich.text import Text

NEWLINE = "␤"  # U+2424: a newline inside a one-line cell
_ESC = "␛"  # U+241B


def visible(text: object, *, newlines: bool = True) -> str:
    """*text* with every control/format character replaced by a visible stand-in.

    C0 controls become Unicode control pictures (``\\x00`` -> ``␀``, ESC -> ``␛``), DEL ``␡``,
    C1 controls and format characters (bidi overrides, zero-width joiners) a ``\\xNN`` or
    ``\\uNNNN`` escape. Tabs stay; newlines stay unless *newlines* is False (one-line cells).
    """
    out: list[str] = []
    for ch in str(text):
        if ch == "\n":
            out.append(ch if newlines else NEWLINE)
        elif ch == "\t":
            out.append(ch)
        elif ch == "\x1b":
            out.append(_ESC)
        elif ch < " ":
            out.append(chr(0x2400 + ord(ch)))
        elif ch == "\x7f":
            out.append("␡")
        elif "\x80" <= ch <= "\x9f":
            out.append(f"\\x{ord(ch):02x}")
        elif unicodedata.category(ch) in ("Cf", "Zl", "Zp", "Co", "Cs"):
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return "".join(out)


def host_text(text: object, style: str = "", *, newlines: bool = True) -> Text:
    """A ``Text`` of host-derived *text*: escapes visible, markup never parsed."""
    return Text(visible(text, newlines=newlines), style=style)


def host_line(text: object, style: str = "") -> Text:
    """One-line variant for table cells and labels: newlines shown as ``␤``."""
    return host_text(text, style, newlines=False)


def join(parts: Iterable[Text | str], separator: str = "") -> Text:
    """Join texts without ever parsing a plain ``str`` part as markup."""
    return Text(separator).join(p if isinstance(p, Text) else Text(p) for p in parts)
