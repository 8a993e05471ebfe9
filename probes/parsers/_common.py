"""Small helpers shared by the parsers.

Kept here so that every parser strips launcher prefixes, reads numbers and converts sizes the
same way; a fix to, say, the Open MPI prefix then reaches every log-shaped KIND at once.
"""

from __future__ import annotations

import re
from typing import NoReturn

from . import ParseError

# Prefixes launchers put in front of each line of a job's output:
#   Open MPI --tag-output  "[1,0]<stdout>:"  / "[1,0]<stderr>:"
#   torchrun (2.x)         "[rank3]:" / "[default0]:"
#   Slurm srun --label     "3: "  (only with a trailing space, to leave "3:15" alone)
_LOG_PREFIX = re.compile(r"^(?:\[\d+,\d+\]<(?:stdout|stderr)>:|\[(?:rank|default)\d+\]:|\d{1,5}: )")

# A Markdown quote ("> ", "> > ") in front of every line of a pasted reply.
_QUOTE = re.compile(r"^\s*(?:>[ \t]?)+")

_INT = re.compile(r"^[+-]?\d+$")
_NUM = re.compile(r"^[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?$")

# Binary units as PyTorch and ioping print them; SI units as dd prints them.
_UNIT_BYTES: dict[str, int] = {
    "b": 1,
    "byte": 1,
    "bytes": 1,
    "kib": 1 << 10,
    "mib": 1 << 20,
    "gib": 1 << 30,
    "tib": 1 << 40,
    "pib": 1 << 50,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "pb": 10**15,
}

# Time units to microseconds, the contract's latency unit.
_UNIT_US: dict[str, float] = {
    "ns": 1e-3,
    "us": 1.0,
    "µs": 1.0,
    "usec": 1.0,
    "ms": 1e3,
    "msec": 1e3,
    "s": 1e6,
    "sec": 1e6,
    "min": 60e6,
    "hour": 3600e6,  # ioping's print_time for very long totals
    "day": 86400e6,
}


def fail(what: str, reason: str) -> NoReturn:
    """Raise the uniform "not X output: why" error the CLI shows to the operator."""
    raise ParseError(f"not {what} output: {reason}")


def text_lines(text: str) -> list[str]:
    """Split on any newline convention, including the bare CRs of progress meters."""
    return text.replace("\r\n", "\n").replace("\r", "\n").split("\n")


def strip_prefix(line: str) -> str:
    """Remove one launcher prefix (mpirun, torchrun, srun --label) from a log line."""
    # Every prefix starts with "[" or a digit (str.isdigit is wider than \d: never skips one);
    # most lines start with neither, and every parser calls this on every line.
    if not line or (line[0] != "[" and not line[0].isdigit()):
        return line
    return _LOG_PREFIX.sub("", line, count=1)


def unquote(line: str) -> str:
    """Remove a Markdown quote marker from a pasted line; for tools whose lines never start
    with ">" (dcgmi, perftest, nvbandwidth, gpu_burn)."""
    return _QUOTE.sub("", line, count=1)


def to_int(value: str | None) -> int | None:
    """Integer as printed, or None for N/A, blanks and anything else non-numeric."""
    if value is None:
        return None
    value = value.strip()
    return int(value) if _INT.match(value) else None


def to_float(value: str | None) -> float | None:
    """Float as printed, or None; rejects inf/nan so results stay valid JSON."""
    if value is None:
        return None
    value = value.strip()
    return float(value) if _NUM.match(value) else None


def to_number(value: str | None) -> int | float | None:
    """Int when printed without a fraction, float otherwise (e.g. ibstat "Rate: 2.5")."""
    as_int = to_int(value)
    if as_int is not None:
        return as_int
    return to_float(value)


def size_to_bytes(number: str, unit: str) -> int | None:
    """Convert "2.00", "GiB" to 2147483648; None for a unit we do not know."""
    factor = _UNIT_BYTES.get(unit.strip().lower())
    value = to_float(number.replace(",", "."))
    if factor is None or value is None:
        return None
    return round(value * factor)


def time_to_us(number: str, unit: str) -> float | None:
    """Convert a latency with its unit (ns, us, ms, s) to microseconds."""
    factor = _UNIT_US.get(unit.strip().lower())
    value = to_float(number)
    if factor is None or value is None:
        return None
    return round(value * factor, 6)


def yes_no(value: object) -> bool | None:
    """nvidia-smi's Yes / No (any case, padded) as a bool; anything else None."""
    if isinstance(value, str):
        return {"yes": True, "no": False}.get(value.strip().lower())
    return None


def none_if_na(value: str | None) -> str | None:
    """Treat the tools' placeholders for "no value" as absent."""
    if value is None:
        return None
    value = value.strip()
    if value == "" or value.upper() in {"N/A", "[N/A]", "NA", "-"}:
        return None
    return value
