"""The fault/twin examples of fixtures/signatures/, as script outputs and as whole fleets.

An example edits one component's healthy baseline (fixtures/scenarios/_baseline/): the judge
test (tests/probes/test_signature_examples.py) replays one faulty host among four; the walk
tests (tests/test_signature_walks.py, and over real sshd tests/fleet/test_signature_walks_ssh.py)
pack many examples into one scenario fleet — each example's fault on one host and its twin on
another, a few examples per component per fleet, every other host the baseline — and walk it
from runbooks that are not the obvious ones for most faults.
"""

from __future__ import annotations

import functools
import itertools
from pathlib import Path
from typing import Any

from probes.base import get_probe, split_sections
from probes.faults.catalogue import load_faults
from probes.model import Finding
from tests import yamlc

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "fixtures" / "signatures"
BASELINE = ROOT / "fixtures" / "scenarios" / "_baseline"
# Lines added to a stream rather than a section replaced: (component, section).
STREAMS = {"kernel-stream": ("kernel", "kernel"), "job-stream": ("logs", "lines")}
# The logs component's lines section names the file each line came from (rank 0's stderr).
_JOB_FILE = "--- file 2 matched 1 named 0 shared 0\n"


@functools.cache
def examples() -> list[tuple[str, dict[str, Any]]]:
    """(family file, example) for every example, in file order (read once: ~40,000 lines of
    YAML, the counter examples carrying whole sysfs and ethtool samples). Do not modify."""
    out = []
    for path in sorted(EXAMPLES.glob("*.yaml")):
        for example in yamlc.load(path.read_text(encoding="utf-8")):
            out.append((path.stem, example))
    return out


def component(example: dict[str, Any]) -> str:
    """The component whose output the example edits."""
    named = example.get("probe") or example.get("component")
    if named:
        return str(named)
    for stream, (name, _) in STREAMS.items():
        if stream in (example.get("fault") or {}):
            return name
    return load_faults().signatures[example["signature"]].probe


def section_edits(edits: dict[str, Any] | None) -> dict[str, Any]:
    """The example's edits as scenario section patches ({NAME: TEXT | null | {text, rc}})."""
    out: dict[str, Any] = {}
    for name, value in (edits or {}).items():
        if name in STREAMS:
            comp, section = STREAMS[name]
            before = split_sections((BASELINE / f"{comp}.txt").read_text())[section].text
            value = (before if comp == "kernel" else _JOB_FILE) + value
            name = section
        out[name] = value
    return out


def patches(edits: dict[str, Any] | None) -> dict[str, tuple[str, int] | None]:
    """The example's edits for ``patch_sections``."""
    out: dict[str, tuple[str, int] | None] = {}
    for name, value in section_edits(edits).items():
        if value is None:
            out[name] = None
        elif isinstance(value, dict):
            out[name] = (str(value.get("text", "")), int(value.get("rc", 0)))
        else:
            out[name] = (str(value), 0)
    return out


# --- judging one example (tests/probes/test_signature_examples.py, the docs' example) --------

HOSTS = ["h1", "h2", "h3", "h4"]


def _findings(comp: str, mine: str, others: str,
              spread: int = 1) -> tuple[str, list[Finding]]:
    """h1's state and every finding, *mine* on h1 (and the next hosts up to *spread*) and
    *others* on the rest (the shared marker for a client-side probe: read once, on h1)."""
    from assistant.fleet.replay import ReplayTransport
    from assistant.fleet.scenario import Scenario
    from assistant.runbook.provider import FleetProvider

    probe = get_probe(comp)
    if probe.runs_on == "client" and probe.shared_output is not None:
        others = probe.shared_output("h1")
    scenario = Scenario("signature-example", EXAMPLES, "", "", "", list(HOSTS))
    scenario.outputs = {comp: {h: mine if i < spread else others
                               for i, h in enumerate(HOSTS)}}
    provider = FleetProvider(ReplayTransport(scenario, delay_s=0))
    outcome = provider.run_probe(comp, HOSTS, {}, lambda event: None)
    return outcome.hosts["h1"].state, outcome.findings


def _raised(sig: str, findings: list[Finding], named: list[str] | None) -> set[str] | None:
    """Where *sig* is raised: the hosts it names (with ``hosts:``) or h1 if it names h1;
    None when it is not raised there at all."""
    hits = [f for f in findings if f.code == sig and (named is not None or "h1" in f.hosts)]
    return {h for f in hits for h in f.hosts} if hits else None


def judge(example: dict[str, Any], where: str = "") -> None:
    """Assert that the example's fault raises its signature on its host(s) and that its twin
    is read and does not raise it, through the replay provider a walk uses."""
    from assistant.fleet.scenario import patch_sections

    sig = example["signature"]
    assert sig in load_faults().signatures, f"{where}: no signature {sig}"
    comp = component(example)
    baseline = (BASELINE / f"{comp}.txt").read_text(encoding="utf-8")

    named = example.get("hosts")  # hosts the output names itself (Slurm nodes, rank logs)
    assert named is not None or get_probe(comp).runs_on != "client", \
        f"{where}: a client-side probe's example names its nodes in hosts:"

    fault = patch_sections(baseline, patches(example["fault"]))
    twin = patch_sections(baseline, patches(example["twin"]))
    # fleet: twin, a drift from a norm the baseline lacks: the others run the twin here too
    # fault_hosts: N, a fabric-wide fault shows on several hosts at once (h1 and the next)
    state, found = _findings(comp, fault, twin if example.get("fleet") == "twin" else baseline,
                             spread=int(example.get("fault_hosts", 1)))
    raised = _raised(sig, found, named)
    assert state == "ok" and raised is not None, (where, state, sorted({f.code for f in found}))
    assert named is None or raised == set(named), (where, sorted(raised))

    others = twin if example.get("others") == "twin" else baseline
    state, found = _findings(comp, twin, others)
    assert state == "ok", (where, state)  # the twin is read, not a parse error
    assert _raised(sig, found, named) is None, (where, sorted({f.code for f in found}))


# Severities that accuse a host: a healthy-but-unusual variant raises none on its host.
SERIOUS = {"error", "critical"}


def judge_variant(entry: dict[str, Any], where: str = "") -> None:
    """Assert that a variant of fixtures/signatures/variants/ reads as it should: a ``fault``
    raises its ``signature`` on its host; a ``healthy`` one is read (not a parse error nor
    "not measured") and raises no error or critical finding there (``allow:`` excepted), nor
    any finding of the signatures it names in ``quiet:``."""
    from assistant.fleet.scenario import patch_sections

    baseline = (BASELINE / f"{entry['component']}.txt").read_text(encoding="utf-8")
    kind = "fault" if "fault" in entry else "healthy"
    mine = patch_sections(baseline, patches(entry[kind]))
    state, found = _findings(entry["component"], mine, baseline,
                             spread=int(entry.get("fault_hosts", 1)))
    assert state == "ok", (where, state)
    if kind == "fault":
        assert _raised(entry["signature"], found, None) is not None, \
            (where, sorted({(f.code, tuple(f.hosts)) for f in found}))
        return
    allowed = set(entry.get("allow") or ())
    accusing = sorted({f.code for f in found if "h1" in f.hosts
                       and f.severity in SERIOUS and f.code not in allowed})
    assert not accusing, (where, accusing)
    # the signatures this twin is the twin of, quiet at any severity (a warning included)
    raised = sorted({f.code for f in found if "h1" in f.hosts} & set(entry.get("quiet") or ()))
    assert not raised, (where, raised)


def walked_examples() -> list[dict[str, Any]]:
    """The examples every walk meets: those of the evidence sweep's components (a check of
    the nccl, joblog or ranks probe runs only in the runbook steps that ask for it)."""
    from probes.catalog import load_catalog, sweep_components

    swept = set(sweep_components(load_catalog()))
    return [ex for _, ex in examples() if component(ex) in swept]


def fleets(hosts: int = 16, per_component: int = 1) -> list[dict[str, Any]]:
    """Scenario fleets holding every example: each example's fault on one host, its twin on
    the next (not for a drift signature whose twin is the whole fleet alike; on the next two,
    alone of its component, for one whose fleet is its twin), at most
    *per_component* examples of a component in a fleet so its majority stays the baseline
    (two hosts always keep the whole baseline). Each fleet:
    ``{"outputs": scenario outputs, "faults": {host: signature}, "twins": {host: signature},
    "hosts": [...]}``."""
    by_component: dict[str, list[dict[str, Any]]] = {}
    for example in walked_examples():
        by_component.setdefault(component(example), []).append(example)
    # Round robin over the components: the first fleets span all of them.
    pending = [ex for row in itertools.zip_longest(*by_component.values()) for ex in row
               if ex is not None]
    out = []
    while pending:
        used: dict[str, int] = {}
        fleet: dict[str, Any] = {"outputs": {}, "faults": {}, "twins": {},
                                 "hosts": [f"gpu{i:03d}" for i in range(1, hosts + 1)]}
        free = list(fleet["hosts"])[:-2]
        for example in list(pending):
            comp = component(example)
            paired = example.get("others") != "twin"
            # fleet: twin, a drift from a norm the baseline lacks (RoCE settings on an
            # InfiniBand baseline): its twin on two more hosts makes that norm, and no other
            # example of its component stands beside it to make another.
            norm = example.get("fleet") == "twin"
            twins = 2 if norm else int(paired)
            spread = int(example.get("fault_hosts", 1))  # a fabric-wide fault: several hosts
            if (used.get(comp, 0) >= (1 if norm else per_component)
                    or len(free) < spread + twins):
                continue
            used[comp] = per_component if norm else used.get(comp, 0) + 1
            pending.remove(example)
            sig = example["signature"]
            for _ in range(spread):
                host = free.pop(0)
                fleet["faults"][host] = sig
                fleet["outputs"].setdefault(comp, {})[host] = {
                    "sections": section_edits(example["fault"])}
            for _ in range(twins):
                twin = free.pop(0)
                fleet["twins"][twin] = sig
                fleet["outputs"][comp][twin] = {"sections": section_edits(example["twin"])}
        out.append(fleet)
    return out


def scenario_yaml(fleet: dict[str, Any], runbook: str) -> str:
    """The fleet as a scenario file (docs/scenario-format.md) for *runbook*."""
    first, last = fleet["hosts"][0], fleet["hosts"][-1]
    return yamlc.dump({
        "title": "catalogued faults and their healthy twins, one per component",
        "symptom": "signature examples (fixtures/signatures)", "runbook": runbook,
        "hosts": f"gpu[{first[3:]}-{last[3:]}]", "outputs": fleet["outputs"]},
        sort_keys=False, allow_unicode=True)
