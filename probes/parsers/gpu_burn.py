"""``gpu_burn`` (wilicc/gpu-burn): a timed GEMM burn with result comparison per GPU.

The verdict that matters is the closing "Tested N GPUs:" block (``GPU n: OK`` / ``FAULTY``); a run
that was killed or cut has none, and then diag reports no verdict instead of inventing one. The
progress line is rewritten in place with ``\\r``, so a saved log holds many of them on one
physical line; only the last one is kept. Its layout moved over the years: 2017 releases print
``proc'd: 12 / 13   errors: 0 / 0   temps: 50 C / 51 C`` (no Gflop/s, "/" between GPUs), later
ones ``proc'd: 12 (3500 Gflop/s) - 13 (3490 Gflop/s)   errors: 0 - 0   temps: 50 C - 51 C``;
a GPU with errors gets ``(WARNING!)`` after its count, a dead one ``(DIED!)``, and a missing
temperature prints ``--`` (kept as null).
"""

from __future__ import annotations

import re
from typing import Any

from ._common import fail, strip_prefix, text_lines, to_float, unquote

WHAT = "gpu_burn"

# "Burning for 600 seconds." (current) / "Run length not specified ...  Burning for 10 secs" (2017)
_DURATION = re.compile(r"\bBurning for (\d+) (?:seconds|secs)\b")
# nvidia-smi -L, which gpu_burn runs before the burn: "GPU 0: NVIDIA B300 SXM6 AC (UUID: GPU-...)"
_GPU_NAME = re.compile(r"^\s*GPU (\d+): (.+?) \(UUID: [^)]*\)\s*$")
_TESTED = re.compile(r"^\s*Tested (\d+) GPUs?:\s*$")
_VERDICT = re.compile(r"^\s*GPU (\d+): (OK|FAULTY)\s*$")
_PROGRESS = re.compile(r"(\d+(?:\.\d+)?)%\s+proc'd:(.*)$")
_GFLOPS = re.compile(r"\(\s*(\d+(?:\.\d+)?)\s*Gflop/s\s*\)")
_ERROR_COUNT = re.compile(r"(?<![\w-])(-?\d+)\b")
_TEMP = re.compile(r"(-?\d+)\s*C\b|(?<!-)--(?!-)")
# Lines only gpu_burn prints; nvidia-smi -L lines alone are not a gpu_burn run.
_MARKERS = re.compile(
    r"Burning for \d+|proc'd:|^\s*Tested \d+ GPUs?:|Initialized device \d+ with \d+ MB"
    r"|Using compare file:|Results are \d+ bytes each",
    re.MULTILINE,
)


def _progress(line: str) -> dict[str, Any] | None:
    """One progress line split into its per-GPU lists."""
    m = _PROGRESS.search(line)
    if not m:
        return None
    rest = m.group(2)
    procd, _, after = rest.partition("errors:")
    errors_part, _, temps_part = after.partition("temps:")
    errors_part = re.sub(r"\((?:WARNING|DIED)!\)", " ", errors_part)
    return {
        "percent": to_float(m.group(1)),
        "gflops": [float(g) for g in _GFLOPS.findall(procd)],
        "errors": [int(e) for e in _ERROR_COUNT.findall(errors_part)],
        "temps_c": [int(t.group(1)) if t.group(1) else None for t in _TEMP.finditer(temps_part)],
    }


def parse(text: str) -> dict[str, Any]:
    """Duration, GPU names, the final verdict block and the last progress line."""
    if not _MARKERS.search(text):
        fail(WHAT, "no \"Burning for\", progress (\"proc'd:\") or \"Tested N GPUs\" line found")
    duration: int | None = None
    names: dict[str, str] = {}
    tested: int | None = None
    verdicts: dict[str, str] = {}
    last: dict[str, Any] | None = None
    in_verdicts = False
    for raw in text_lines(text):
        line = unquote(strip_prefix(raw))
        if duration is None:
            m = _DURATION.search(line)
            if m:
                duration = int(m.group(1))
        m = _TESTED.match(line)
        if m:
            tested, verdicts, in_verdicts = int(m.group(1)), {}, True
            continue
        m = _VERDICT.match(line)
        if m and in_verdicts:
            verdicts[m.group(1)] = m.group(2)
            continue
        if line.strip():
            in_verdicts = False
        m = _GPU_NAME.match(line)
        if m:
            names.setdefault(m.group(1), m.group(2).strip())
            continue
        progress = _progress(line)
        if progress is not None:
            last = progress
    return {
        "duration_s": duration,
        "gpu_names": names,
        "gpus_tested": tested,
        "verdicts": verdicts,
        "faulty": sorted(int(gpu) for gpu, verdict in verdicts.items() if verdict == "FAULTY"),
        "last_progress": last,
        "warning": "(WARNING!)" in text,
        "died": "(DIED!)" in text,
    }
