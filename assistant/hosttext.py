"""Host text made inert: control and format characters shown, never obeyed — for every front end.

Probe output, finding messages, evidence, host names and failure reasons come from machines we
are troubleshooting — possibly broken, possibly hostile. Printed raw, ``\\x1b[2J`` clears the
operator's screen, an OSC 52 sequence writes their clipboard, a bidi override reorders what
they read, and an 8-bit CSI (``\\x9b``) does the same on terminals that honour C1 codes. So
every front end passes host-derived text through :func:`visible` (the TUI through
``assistant.tui.safe_text``, which also keeps Rich markup from being parsed; the command line
on every write to stdout and stderr, see ``assistant.cli``), and JSON documents through
:func:`inert_json`, which escapes what JSON itself leaves raw. It sits in the lowest layer so
the CLI, the TUI and anything that prints share one definition.
"""

from __future__ import annotations

import io
import re
import unicodedata
from functools import lru_cache

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (mypy knows the name)
if TYPE_CHECKING:
    from typing import Any, TextIO

NEWLINE = "␤"  # U+2424: a newline inside a one-line cell
_ESC = "␛"  # U+241B
# Everything outside printable ASCII, tab and newline is looked at; the rest (nearly all of a
# probe's output) passes without a per-character loop.
_SUSPECT = re.compile(r"[^\t\n\x20-\x7e]")


@lru_cache(maxsize=4096)
def _stand_in(ch: str) -> str:
    if ch == "\x1b":
        return _ESC
    if ch < " ":
        return chr(0x2400 + ord(ch))
    if ch == "\x7f":
        return "␡"
    if "\x80" <= ch <= "\x9f":
        return f"\\x{ord(ch):02x}"
    if unicodedata.category(ch) in ("Cf", "Zl", "Zp", "Co", "Cs"):
        return f"\\u{ord(ch):04x}"
    return ch


def visible(text: object, *, newlines: bool = True) -> str:
    """*text* with every control/format character replaced by a visible stand-in.

    C0 controls become Unicode control pictures (``\\x00`` -> ``␀``, ESC -> ``␛``), DEL ``␡``,
    C1 controls and format characters (bidi overrides, zero-width joiners) a ``\\xNN`` or
    ``\\uNNNN`` escape. Tabs stay; newlines stay unless *newlines* is False (one-line cells).
    """
    text = str(text)
    if not newlines:
        text = text.replace("\n", NEWLINE)
    return _SUSPECT.sub(lambda m: _stand_in(m.group()), text)


@lru_cache(maxsize=1)
def _json_raw() -> re.Pattern[str]:
    """What json.dumps(ensure_ascii=False) leaves raw although a terminal may obey it (compiled
    on first use: its ranges above U+00FF cost a millisecond or two on every start)."""
    return re.compile(r"[\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff"
                      r"\ufff9-\ufffb]")


def inert_json(document: str) -> str:
    """A JSON text with DEL, C1 controls and bidi/zero-width format characters written as
    ``\\uNNNN`` escapes: the same JSON value, nothing a terminal acts on. (JSON already escapes
    C0 controls such as ESC.)"""
    return _json_raw().sub(lambda m: f"\\u{ord(m.group()):04x}", document)


class InertStream(io.TextIOBase):
    """A text stream that writes through :func:`visible`: everything printed to it is inert.

    The command line wraps stdout and stderr in one for the duration of a command, so no
    path — a progress line, a finding message, a table cell, an error — can pass a raw escape.
    ``failed`` keeps the error that stopped a write (a full disk, a closed pipe), so the command
    line can tell it from any other OSError and say it in one line.
    """

    def __init__(self, stream: TextIO) -> None:
        super().__init__()
        self._stream = stream
        self.failed: OSError | None = None

    def write(self, text: str) -> int:
        try:
            self._stream.write(visible(text))
        except OSError as exc:
            self.failed = exc
            raise
        return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except OSError as exc:
            self.failed = exc
            raise

    def isatty(self) -> bool:
        return self._stream.isatty()

    def fileno(self) -> int:
        return self._stream.fileno()

    def writable(self) -> bool:
        return True

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self._stream, "encoding", "utf-8")

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)
