"""``/proc/pressure/cpu`` (and ``memory``, ``io``): Pressure Stall Information, Linux >= 4.20.

The kernel (kernel/sched/psi.c, ``psi_show``; Documentation/accounting/psi.rst) prints one line
per state::

    some avg10=0.13 avg60=0.68 avg300=0.28 total=1195993
    full avg10=0.00 avg60=0.00 avg300=0.00 total=0

``some``: the share of time (percent) in which at least some tasks were stalled on the
resource; ``full``: all non-idle tasks at once. The averages are over 10 s, 60 s and 300 s;
``total`` is the stall time in microseconds since boot. For CPU, kernels before 5.13 print
only ``some``; since 5.13 a ``full`` line follows, always zero at the system level ("CPU full
is undefined at the system level ... set to zero for backward compatibility", psi.rst). On many
CPUs ``some`` is the share of execution threads with a task waiting (psi.c: SOME =
min(nr_delayed_tasks / threads, 1)). The same format is each cgroup's ``cpu.pressure``.

Returns ``some`` and ``full`` as ``{avg10, avg60, avg300, total_us}`` (``full`` null when the
line is absent). A kernel built with CONFIG_PSI_DEFAULT_DISABLED and booted without ``psi=1``
refuses the read (``cat: /proc/pressure/cpu: Operation not supported``): not PSI output.
"""

from __future__ import annotations

import re
from typing import Any

from ._common import fail, text_lines

WHAT = "/proc/pressure"

_LINE = re.compile(r"^(some|full) avg10=(\d+(?:\.\d+)?) avg60=(\d+(?:\.\d+)?) "
                   r"avg300=(\d+(?:\.\d+)?) total=(\d+)\s*$")


def parse(text: str) -> dict[str, Any]:
    found: dict[str, dict[str, Any] | None] = {"some": None, "full": None}
    for line in text_lines(text):
        m = _LINE.match(line.strip())
        if m:
            found[m.group(1)] = {"avg10": float(m.group(2)), "avg60": float(m.group(3)),
                                 "avg300": float(m.group(4)), "total_us": int(m.group(5))}
    if found["some"] is None:
        first = next((line.strip() for line in text_lines(text) if line.strip()), "")
        fail(WHAT, f"no 'some avg10=... total=...' line{f' ({first[:80]})' if first else ''}")
    return found
