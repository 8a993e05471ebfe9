"""Real-format variants of the catalogued faults, and healthy-but-unusual hosts, judged the way a
walk judges (the replay provider: parse, log lines, checks, fault catalogue, fleet comparison;
one host among four).

fixtures/signatures/ holds one fault/twin example per signature; fixtures/signatures/variants/
holds more, written from other published outputs of the same tools (another driver's
nvidia-smi, another HCA's ibstat, another kernel's log format), so that a signature is checked
against the tool's format and not against one sample. Each entry::

    - name: what it is (shown in the test id)
      source: where the output's format comes from (a document, an issue, a recording)
      component: gpu                  # the component whose baseline it edits
      fault: {SECTION: TEXT, ...}     # edits as in fixtures/signatures/ (kernel-stream, ...)
      signature: ecc-uncorrectable    # a fault: it raises this signature on h1
    - name: ...
      component: gpu
      healthy: {SECTION: TEXT, ...}   # a healthy-but-unusual host: read (not a parse error)
                                      # and no error or critical finding names it

A healthy entry may also list ``allow: [code, ...]``: findings it may raise at that severity
because they are true of it and accuse nobody (none today; say why beside it).
"""

from __future__ import annotations

from typing import Any

import pytest

from tests import yamlc
from tests.signature_examples import EXAMPLES, judge_variant

VARIANTS = EXAMPLES / "variants"


def _variants() -> list[tuple[str, dict[str, Any]]]:
    out = []
    for path in sorted(VARIANTS.glob("*.yaml")):
        for entry in yamlc.load(path.read_text(encoding="utf-8")) or []:
            out.append((path.stem, entry))
    return out


ALL = _variants()


@pytest.mark.parametrize(("family", "entry"), ALL,
                         ids=[f"{fam}:{e['name']}" for fam, e in ALL])
def test_variant(family: str, entry: dict[str, Any]) -> None:
    assert entry.get("source"), f"{family}: {entry['name']}: no source"
    judge_variant(entry, f"{family}: {entry['name']}")


def test_variant_files_are_lists_of_named_entries() -> None:
    assert len(ALL) >= 100  # the families' files are all read
    for path in sorted(VARIANTS.glob("*.yaml")):
        entries = yamlc.load(path.read_text(encoding="utf-8")) or []
        assert isinstance(entries, list), path
        for entry in entries:
            assert {"name", "source", "component"} <= set(entry), (path, entry.get("name"))
            assert ("fault" in entry) != ("healthy" in entry), (path, entry["name"])
            assert "fault" not in entry or "signature" in entry, (path, entry["name"])
