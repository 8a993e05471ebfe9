"""Parsers never leak an exception other than ParseError, and refuse foreign output.

``diag parse`` and the probes run parsers on whatever a node printed: cut-off pastes, binary
junk, the wrong command's output. The property tests feed every KIND random text, random bytes
decoded with replacement characters, and real samples truncated or with lines dropped; the
only acceptable outcomes are a JSON-serialisable dict or a one-line ParseError.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from probes.parsers import KINDS, ParseError, parse

from .acceptance_variants import VARIANTS

REAL = Path(__file__).resolve().parents[2] / "fixtures" / "real"
SAMPLES = sorted(REAL.glob("*__*.txt"))
TEXTS = {p.name: p.read_text(encoding="utf-8") for p in SAMPLES}

FAST = settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Pairs (parser kind, sample kind) where accepting the other kind's output is legitimate:
# nccl-tests logs routinely carry NCCL INFO lines, which are NCCL debug output.
# (parser, sample kind) pairs where the parser rightly accepts the other kind's sample: NCCL
# INFO lines in nccl-tests output; PyTorch watchdog lines are rank-progress logs too.
# A kernel log is both a dmesg-xid and a dmesg-link input (a log without Xid or link lines is
# the healthy case of either); ib-sysfs-counters reads hw_counters listings too.
OVERLAPS = {("nccl-debug", "nccl-tests"), ("rank-logs", "nccl-debug"),
            ("dmesg-xid", "dmesg-link"), ("dmesg-link", "dmesg-xid"),
            ("ib-sysfs-counters", "ib-hw-counters"),
            # a full nvidia-smi -q holds the Fabric blocks; NVML's start-up errors read alike
            # from nvidia-smi and nvidia-smi -L
            ("nvidia-smi-fabric", "nvidia-smi-q"), ("nvidia-smi-L", "nvidia-smi"),
            ("nvidia-smi", "nvidia-smi-L"),
            # dmesg-xid and dmesg-link read kernel logs of every shape, as kernel-log does
            ("dmesg-xid", "kernel-log"), ("dmesg-link", "kernel-log"),
            ("kernel-log", "dmesg-xid"), ("kernel-log", "dmesg-link"),
            # an NCCL line behind a syslog-style wall-clock stamp reads as a log line
            ("kernel-log", "nccl-debug")}


def _kind(name: str) -> str:
    return name.split("__", 1)[0]


def _parses_or_refuses(kind: str, text: str) -> None:
    """The property: a strict-JSON dict, or a ParseError with a one-line message."""
    try:
        result = parse(kind, text)
    except ParseError as exc:
        message = str(exc)
        assert message and "\n" not in message
        return
    assert isinstance(result, dict)
    json.dumps(result, allow_nan=False)


@st.composite
def damaged_samples(draw: st.DrawFn, kind: str) -> str:
    """A real sample (half the time one of ``kind``) truncated and/or with lines dropped."""
    own = [name for name in TEXTS if _kind(name) == kind]
    pool = own if own and draw(st.booleans()) else list(TEXTS)
    text = TEXTS[draw(st.sampled_from(sorted(pool)))]
    lines = text.splitlines(keepends=True)
    if lines and draw(st.booleans()):
        dropped = draw(st.sets(st.integers(0, len(lines) - 1), max_size=max(1, len(lines) // 3)))
        lines = [line for i, line in enumerate(lines) if i not in dropped]
    text = "".join(lines)
    if draw(st.booleans()):
        start = draw(st.integers(0, len(text)))
        end = draw(st.integers(start, len(text)))
        text = text[start:end]
    return text


@pytest.mark.parametrize("kind", KINDS)
@FAST
@given(text=st.text(max_size=400))
def test_random_text(kind: str, text: str) -> None:
    # arbitrary unicode text
    _parses_or_refuses(kind, text)


@pytest.mark.parametrize("kind", KINDS)
@FAST
@given(data=st.binary(max_size=400))
def test_random_bytes_decoded(kind: str, data: bytes) -> None:
    # random bytes decoded as UTF-8 with replacement characters
    _parses_or_refuses(kind, data.decode("utf-8", errors="replace"))


@pytest.mark.parametrize("kind", KINDS)
@FAST
@given(data=st.data())
def test_damaged_real_samples(kind: str, data: st.DataObject) -> None:
    # real samples cut at random points or with random lines dropped
    _parses_or_refuses(kind, data.draw(damaged_samples(kind)))


@st.composite
def damaged_variants(draw: st.DrawFn, kind: str) -> str:
    """A hand-written variant of ``kind`` (formats no public sample shows), cut or thinned."""
    text = VARIANTS[kind][draw(st.sampled_from(sorted(VARIANTS[kind])))]
    lines = text.splitlines(keepends=True)
    dropped = draw(st.sets(st.integers(0, max(0, len(lines) - 1)), max_size=len(lines) // 3))
    text = "".join(line for i, line in enumerate(lines) if i not in dropped)
    start = draw(st.integers(0, len(text)))
    return text[start : draw(st.integers(start, len(text)))]


@pytest.mark.parametrize("kind", sorted(VARIANTS))
@FAST
@given(data=st.data())
def test_damaged_variants(kind: str, data: st.DataObject) -> None:
    # the variants of other releases (dcgmi JSON, perftest QoS/MiB, gpu_burn 2017 ...) damaged
    _parses_or_refuses(kind, data.draw(damaged_variants(kind)))


# dcgmi -j documents of any shape under the keys dcgmi uses: wrong types must not crash it.
_DCGM_KEYS = st.sampled_from(["DCGM Diagnostic", "DCGM GPU Diagnostic", "test_categories",
                              "category", "tests", "name", "results", "status", "warnings",
                              "warning", "gpu_id", "gpu_ids", "entity_id", "entity_group",
                              "entity_group_id", "test_summary", "metadata", "version",
                              "Driver Version Detected", "entity_groups", "entities",
                              "device_id", "iterations", "runtime_error", "GPU Device IDs"])
_JSON_TREES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8)
    | st.sampled_from(["Pass", "Fail", "Warn", "Skip", "GPU", "0,1"]),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(_DCGM_KEYS, children, max_size=5),
    max_leaves=30,
)


@FAST
@given(tree=_JSON_TREES)
def test_dcgmi_json_of_any_shape(tree: object) -> None:
    # a document whose values have the wrong types parses partially or is refused
    _parses_or_refuses("dcgmi-diag", json.dumps({"DCGM Diagnostic": tree}))
    _parses_or_refuses("dcgmi-diag", json.dumps(tree))


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("text", ["", "\n", "   \n\t\n"], ids=["empty", "newline", "blank"])
def test_empty_input_is_parse_error(kind: str, text: str) -> None:
    # no output at all is never a result ("no data is never a pass")
    with pytest.raises(ParseError, match=r"^not .* output: "):
        parse(kind, text)


@pytest.mark.parametrize("kind", KINDS)
def test_random_prose_is_parse_error(kind: str) -> None:
    # plain prose names no tool
    with pytest.raises(ParseError, match=r"^not .* output: "):
        parse(kind, "The quick brown fox jumps over the lazy dog.\nNothing to see here.\n")


CROSS = [
    (kind, name)
    for kind in KINDS
    for name in sorted(TEXTS)
    if _kind(name) != kind and (kind, _kind(name)) not in OVERLAPS
]


@pytest.mark.parametrize(("kind", "name"), CROSS, ids=[f"{k}<-{n}" for k, n in CROSS])
def test_other_kinds_sample_is_parse_error(kind: str, name: str) -> None:
    # every parser refuses every real sample of a different kind, with a one-line reason
    with pytest.raises(ParseError, match=r"^not .* output: ") as info:
        parse(kind, TEXTS[name])
    assert "\n" not in str(info.value)


def test_internal_errors_become_parse_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    # a bug inside a parser surfaces as ParseError naming the kind, never as a raw exception
    import probes.parsers.uname_r as module

    def broken(text: str) -> dict[str, object]:
        raise KeyError("boom")

    monkeypatch.setattr(module, "parse", broken)
    with pytest.raises(ParseError, match=r"^uname-r: cannot parse output \(KeyError"):
        parse("uname-r", "5.15.0-91-generic\n")


def test_non_text_input_is_parse_error() -> None:
    # bytes must be decoded by the caller; the dispatcher says so instead of crashing
    with pytest.raises(ParseError, match="expected text"):
        parse("uname-r", b"5.15.0-91-generic\n")  # type: ignore[arg-type]
