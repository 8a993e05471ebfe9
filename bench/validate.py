"""Benchmark: validating a generated runbook of N nodes (every layer: YAML, schema, references,
conditions, graph).

The runbook is a chain of probe nodes, each branching on a finding to a conclusion of its own,
on a fact, and falling through to the next probe; the last probe concludes "healthy". Half the
nodes are conclusions, so the "can every node reach a conclusion" check has as many targets as
a runbook can have. Not a test (tests/test_validate_scale.py keeps the size honest); run it::

    .venv/bin/python bench/validate.py                  # 20,000 nodes
    .venv/bin/python bench/validate.py --nodes 2000 --nodes 20000

A 20,000-node runbook is over the YAML loader's limits for a user's file (4 MiB, 200,000
values: assistant.yamlfile), so diag refuses it at once with that limit; the bench first shows
that refusal and its time, then lifts the limits in this process only, to time the validator
itself.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from assistant.runbook.validate import validate_text  # noqa: E402


def generated_runbook(nodes: int) -> str:
    """YAML text of a valid runbook with *nodes* nodes (rounded down to an even number)."""
    probes = max(1, nodes // 2)
    lines = ["id: generated", "title: A generated runbook", "summary: For the validation bench.",
             "symptoms: [generated]", "start: p0", "nodes:"]
    for i in range(probes):
        after = f"p{i + 1}" if i + 1 < probes else "healthy"
        lines += [f"  p{i}:", "    kind: probe", f"    title: Probe {i}",
                  "    explain: One step of a long chain.", "    probes: [gpu]",
                  "    branches:",
                  "      - when: {any: [xid-drain]}", f"        goto: c{i}",
                  "      - when: {fact: gpu.gpu_count, op: lt, value: 8}", f"        goto: c{i}",
                  f"      - goto: {after}"]
        lines += [f"  c{i}:", "    kind: conclusion", f"    title: Conclusion {i}",
                  "    explain: Where the chain stops.", "    cause: A generated cause.",
                  "    fix: A generated fix.", "    severity: error"]
    lines += ["  healthy:", "    kind: conclusion", "    title: Healthy",
              "    explain: Nothing found.", "    cause: none", "    fix: none",
              "    severity: info"]
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, action="append")
    args = parser.parse_args(argv)
    validate_text(generated_runbook(20), "warm.yaml")  # imports and the catalog, once
    began = time.perf_counter()
    _, refused = validate_text(generated_runbook(20_000), "generated.yaml")
    print(f"20000 nodes with diag's limits: {time.perf_counter() - began:.2f} s, "
          f"{refused[0] if refused else 'accepted'}", flush=True)
    from assistant import yamlfile

    yamlfile.MAX_BYTES, yamlfile.MAX_VALUES = 1 << 30, 1 << 30
    for n in args.nodes or [20_000]:
        text = generated_runbook(n)
        began, cpu = time.perf_counter(), time.process_time()
        runbook, issues = validate_text(text, "generated.yaml")
        seconds, cpu = time.perf_counter() - began, time.process_time() - cpu
        state = f"{len(runbook.nodes)} nodes, valid" if runbook else f"{len(issues)} issues"
        print(f"{n} nodes: validated in {seconds:.2f} s wall, {cpu:.2f} s CPU ({state})",
              flush=True)
        if issues:
            print("\n".join(map(str, issues[:5])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
