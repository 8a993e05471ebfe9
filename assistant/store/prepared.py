"""A probe run's store rows, prepared wherever the probe ran.

Recording a step is mostly CPU spent on data that is final the moment a probe ends: each
host's raw output bounded, redacted, hashed and compressed; its facts redacted and serialised;
its acceptance figures flattened into rows. In the TUI the probes run in a worker process
(``assistant.probeworker``) while the step is recorded on the UI process's walk thread, and
that work held the event loop's GIL there for 1.4-9 s per step at 128 hosts under load. So the
worker calls ``prepare_outcome`` right after each probe and sends the ``PreparedRun`` rows with
the outcome; ``writes.record_step`` takes them as they are and only inserts them. Every other
walk (in-process: replays, drills, Slurm, local; the journal's import) goes through the same
``prepare_run`` inside ``record_step``: one code path prepares every row the store keeps.

Redaction happens here, before anything is written or sent, whichever process runs it: a
``PreparedRun`` holds only redacted, bounded text.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .raw import blob
from .redact import bound_redacted, redact_data

Key = tuple[str, str]  # (probe, host), as in a provider's ``raw``


def to_json(value: Any) -> str | None:
    """The store's JSON text for a value (None stays NULL)."""
    if value is None:
        return None
    return json.dumps(value, ensure_ascii=False, default=str, separators=(",", ":"))


@dataclass(frozen=True)
class PreparedRun:
    """One probe's result on one host as the store keeps it, all redacted.

    *state* and *duration_s* name the run it was prepared from: ``record_step`` uses it only
    for a result that carries the same two (a later run of the probe replaces it)."""

    state: str
    duration_s: float
    facts: str  # the redacted facts as JSON ("{}" when none)
    raw_hash: str | None = None  # SHA-256 of the stored (bounded, redacted) output
    raw_bytes: int | None = None  # the output's size before it was bounded
    blob: list[Any] | None = None  # its ``raw_blobs`` row (shared by identical outputs)
    figures: tuple[list[Any], ...] = ()  # ``acceptance`` rows after (session, seq, ts, host)

    def matches(self, result: Mapping[str, Any]) -> bool:
        """Whether this was prepared from *result* (a host's result as ``to_dict`` gives it)."""
        return (self.state == result.get("state", "ok")
                and self.duration_s == float(result.get("duration_s") or 0.0))


# What one distinct output becomes: (its hash, its size before bounding, its raw_blobs row).
Blobs = dict[bytes, tuple[str, int, list[Any]]]


def prepare_run(result: Mapping[str, Any], text: str | None,
                blobs: Blobs | None = None) -> PreparedRun:
    """*result* (``HostResult.to_dict()``) and its raw output *text* as stored rows. *blobs*
    caches distinct outputs: a homogeneous fleet's identical outputs are bounded, redacted,
    hashed and compressed once (and share one row object, which pickles once)."""
    facts = redact_data(result.get("facts") or {})
    kept = None
    if text:
        # Keyed by a digest of the text, not the text: the cache lived as long as the step
        # and held every distinct output (270 MB over a 1,000-host sweep).
        seen = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()
        kept = blobs.get(seen) if blobs is not None else None
        if kept is None:
            digest, row = blob(bound_redacted(text))
            kept = (digest, len(text.encode("utf-8", "replace")), row)
            if blobs is not None:
                blobs[seen] = kept
    figures = facts.get("figures") if isinstance(facts, dict) else None
    return PreparedRun(
        state=str(result.get("state", "ok")), duration_s=float(result.get("duration_s") or 0.0),
        facts=to_json(facts) or "{}", raw_hash=kept[0] if kept else None,
        raw_bytes=kept[1] if kept else None, blob=kept[2] if kept else None,
        figures=tuple(figure_row(fig) for fig in figures or []))


def prepare_outcome(outcome: Any, raw: Mapping[Key, str]) -> dict[Key, PreparedRun]:
    """Every host's rows of one probe's outcome (``probes.model.ProbeOutcome``), with *raw*
    the provider's outputs; what the probe worker sends beside the outcome."""
    blobs: Blobs = {}
    return {(outcome.probe, host): prepare_run(result.to_dict(),
                                               raw.get((outcome.probe, host)), blobs)
            for host, result in outcome.hosts.items()}


def figure_row(fig: Mapping[str, Any]) -> list[Any]:
    """An acceptance figure (already redacted) as its row's columns after (session_id,
    step_seq, ts, host): level, test, gpu, metric, value, unit, op, threshold, verdict,
    source, detail."""
    return [int(fig.get("level") or 0), str(fig.get("test")), fig.get("gpu"),
            str(fig.get("metric")), _number(fig.get("value")), fig.get("unit"), fig.get("op"),
            _number(fig.get("threshold")), str(fig.get("verdict")), fig.get("source"),
            to_json(_detail(fig))]


def split_step(step: Mapping[str, Any], raw: Mapping[Key, str] | None,
               prepared: Mapping[Key, PreparedRun] | None,
               ) -> tuple[dict[str, Any], list[list[PreparedRun]]]:
    """(the step as ``steps.record`` keeps it, each outcome's runs in host order).

    The record leaves each host's facts out where its probe-run row holds them (the first
    outcome of a probe in the step), so facts are stored once; it is not redacted yet (the
    caller redacts what is left, which no longer holds the facts). A run comes from
    *prepared* when that was prepared from this very result, else it is prepared here."""
    seen: set[Key] = set()
    blobs: Blobs = {}
    outcomes, runs = [], []
    for outcome in step.get("outcomes") or []:
        probe = outcome["probe"]
        hosts, mine = {}, []
        for host, result in (outcome.get("hosts") or {}).items():
            key = (probe, host)
            run = prepared.get(key) if prepared and key not in seen else None
            if run is None or not run.matches(result):
                run = prepare_run(result, (raw or {}).get(key), blobs)
            mine.append(run)
            hosts[host] = result if key in seen else \
                {k: v for k, v in result.items() if k != "facts"}
            seen.add(key)
        outcomes.append({**outcome, "hosts": hosts})
        runs.append(mine)
    return {**step, "outcomes": outcomes}, runs


def _detail(fig: Mapping[str, Any]) -> dict[str, Any]:
    """The figure's context, with a value that is not a number ("Fail", "FAULTY") kept too."""
    detail = dict(fig.get("detail") or {})
    if fig.get("value") is not None and _number(fig.get("value")) is None:
        detail["value"] = fig["value"]
    return detail


def _number(value: Any) -> float | None:
    """A figure's value as a number for the column (a list of counters stays in detail)."""
    if isinstance(value, bool):
        return float(value)
    return float(value) if isinstance(value, int | float) else None
