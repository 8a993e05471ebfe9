"""Simulated incidents: a fleet, what each host's probes print, and the expected conclusion.

A scenario is a directory under ``fixtures/scenarios/`` holding ``scenario.yaml`` and the
outputs it names. Outputs not named fall back to ``fixtures/scenarios/_baseline/PROBE.txt``,
a healthy node built from real recorded outputs, so a scenario only spells out what is wrong.
Drills, ``--demo`` and the tests all run on these through the replay transport.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from assistant import yamlfile
from assistant.fleet.hostexpr import InventoryError, expand_part
from assistant.fleet.local import MAX_OUTPUT
from assistant.locations import fixtures_dir

_KEYS = {"title", "symptom", "runbook", "hosts", "attrs", "answers", "params", "expect",
         "outputs", "states", "delay_s", "description", "clues", "monitoring"}
# What one scenario's output files may hold in all (each file is also cut at the transports'
# per-stream limit, MAX_OUTPUT, as a real host's output would be): a drill is a few MiB.
SCENARIO_OUTPUT_BUDGET = 64 * 1024 * 1024


class ScenarioError(ValueError):
    """A scenario that cannot be used; the message names the file and the problem."""


@dataclass
class HostState:
    """How a host fails: a transport state and why. *phase* says where (``connect``: the host
    did not let diag in; ``command``: diag got in and the probe hung — its partial output is the
    scenario's output for that host and probe). *probes* limits it to some probes (a hung
    nvidia-smi hangs the gpu probe, not the log reader); empty means every probe."""

    state: str
    reason: str = ""
    phase: str = ""
    probes: tuple[str, ...] = ()
    # probe -> what ps printed for its processes when the sweep's limit ended it ("PID STAT
    # ELAPSED WCHAN COMM", probes/sweep.py): a driver's D state, or a slow command's R / S.
    processes: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def applies_to(self, probe: str | None) -> bool:
        return not self.probes or probe in self.probes


@dataclass
class Scenario:
    name: str
    path: Path
    title: str
    symptom: str
    runbook: str
    hosts: list[str]
    attrs: dict[str, dict[str, Any]] = field(default_factory=dict)
    answers: dict[str, str] = field(default_factory=dict)
    params: dict[str, dict[str, Any]] = field(default_factory=dict)
    expect: dict[str, Any] = field(default_factory=dict)
    # probe -> host (or 'default') -> output text
    outputs: dict[str, dict[str, str]] = field(default_factory=dict)
    states: dict[str, HostState] = field(default_factory=dict)
    delay_s: float = 0.0
    description: str = ""
    # question node -> what the operator finds on checking (shown when it is asked: a drill's
    # trainee answers from evidence, not from the scenario's answers)
    clues: dict[str, str] = field(default_factory=dict)
    # A recorded incident window (assistant/monitoring/recorded.py): what the monitoring step
    # found over a real Prometheus, replayed in the walk's sweep with no server.
    monitoring: Path | None = None

    def output(self, host: str, probe: str) -> str | None:
        """What *probe* prints on *host*: its own output, the scenario default, or the baseline.
        The evidence sweep prints its components' outputs in one (probes/sweep.py)."""
        if probe == SWEEP:
            return self.sweep_output(host)
        per_probe = self.outputs.get(probe, {})
        if host in per_probe:
            return per_probe[host]
        if "default" in per_probe:
            return per_probe["default"]
        baseline = scenarios_dir() / "_baseline" / f"{probe}.txt"
        return read_bounded(baseline) if baseline.is_file() else None


    def sweep_output(self, host: str) -> str:
        """The sweep's answer on *host*: every component's output, each as this scenario says;
        a component the scenario says hangs on this host (``states`` with ``phase: command``
        and ``probes: [...]``) prints what it printed before it hung, and hits the limit."""
        from probes.catalog import load_catalog, sweep_components
        from probes.sweep import Part, compose

        state = self.states.get(host)
        parts = []
        for name in sweep_components(load_catalog()):
            if state is not None and state.phase == "command" and name in state.probes:
                parts.append((name, Part(self.outputs.get(name, {}).get(host, ""), None, True,
                                         state.processes.get(name, ()))))
                continue
            text = self.output(host, name)
            if text is not None:
                parts.append((name, Part(text, 0)))
        return compose(parts)


SWEEP = "sweep"


def scenarios_dir() -> Path:
    return fixtures_dir() / "scenarios"


def scenario_names() -> list[str]:
    return sorted(p.parent.name for p in scenarios_dir().glob("*/scenario.yaml"))


def load_scenario(name_or_path: str) -> Scenario:
    path = Path(name_or_path)
    if not path.exists():
        path = scenarios_dir() / name_or_path
    if path.is_dir():
        path = path / "scenario.yaml"
    if not path.is_file():
        raise ScenarioError(f"no scenario '{name_or_path}' (known: {', '.join(scenario_names())})")
    try:
        data = yamlfile.load_file(path).data
    except yamlfile.YamlFileError as exc:
        raise ScenarioError(str(exc)) from None
    if not isinstance(data, dict):
        raise ScenarioError(f"{path}: a scenario is a YAML mapping")
    unknown = sorted(set(data) - _KEYS)
    if unknown:
        hint = yamlfile.did_you_mean(unknown[0], _KEYS).strip(" ()")
        raise ScenarioError(f"{path}: unknown key '{unknown[0]}' ({hint + ' ' if hint else ''}"
                            f"allowed: {', '.join(sorted(_KEYS))})")
    for key in ("title", "symptom", "runbook", "hosts"):
        if key not in data:
            raise ScenarioError(f"{path}: missing '{key}'")
    base = path.parent
    hosts = _expand(data["hosts"], path)
    attrs: dict[str, dict[str, Any]] = {h: {} for h in hosts}
    for expr, values in (data.get("attrs") or {}).items():
        for host in _expand(expr, path):
            if host not in attrs:
                raise ScenarioError(f"{path}: attrs name '{host}', which is not in hosts")
            attrs[host].update(values)
    outputs: dict[str, dict[str, str]] = {}
    files: dict[str, str] = {}  # each output file read once, however many hosts print it
    for probe, per_host in (data.get("outputs") or {}).items():
        outputs[probe] = {}
        # "default" first: a host's section patch applies to the scenario's default output
        for expr, ref in sorted(per_host.items(), key=lambda item: item[0] != "default"):
            if isinstance(ref, dict):
                text = _patched(probe, ref, outputs[probe].get("default"), base, path, files)
            else:
                text = _read_output(base, ref, path, files)
            for host in (["default"] if expr == "default" else _expand(expr, path)):
                outputs[probe][host] = text
    states = {}
    for expr, value in (data.get("states") or {}).items():
        value = {"state": value} if isinstance(value, str) else value
        unknown = sorted(set(value) - {"state", "reason", "phase", "probes", "processes"})
        if unknown:
            raise ScenarioError(f"{path}: states.{expr}: unknown key(s) {', '.join(unknown)}")
        processes = value.get("processes") or {}
        if not isinstance(processes, dict) or not all(
                isinstance(rows, list) and all(isinstance(r, str) for r in rows)
                for rows in processes.values()):
            raise ScenarioError(f"{path}: states.{expr}: processes maps a probe to a list of "
                                "ps rows ('PID STAT ELAPSED WCHAN COMM')")
        if value.get("phase", "") not in ("", "connect", "command"):
            raise ScenarioError(f"{path}: states.{expr}: phase is 'connect' or 'command', "
                                f"not {value['phase']!r}")
        for host in _expand(expr, path):
            states[host] = HostState(value["state"], value.get("reason", ""),
                                     value.get("phase", ""), tuple(value.get("probes") or ()),
                                     {str(k): tuple(v) for k, v in processes.items()})
    monitoring = None
    if data.get("monitoring"):
        monitoring = (base / str(data["monitoring"])).resolve()
        if not monitoring.is_relative_to(base.resolve()) or not monitoring.is_file():
            raise ScenarioError(f"{path}: monitoring: no file '{data['monitoring']}' beside "
                                "the scenario")
    return Scenario(
        monitoring=monitoring,
        name=path.parent.name, path=path, title=data["title"], symptom=data["symptom"],
        runbook=data["runbook"], hosts=hosts, attrs=attrs,
        answers={k: str(v) for k, v in (data.get("answers") or {}).items()},
        params=data.get("params") or {}, expect=data.get("expect") or {},
        outputs=outputs, states=states, delay_s=float(data.get("delay_s", 0.0)),
        description=data.get("description", ""),
        clues={str(k): " ".join(str(v).split()) for k, v in (data.get("clues") or {}).items()})


def _expand(expr: str, path: Path) -> list[str]:
    try:
        return expand_part(str(expr))
    except InventoryError as exc:
        raise ScenarioError(f"{path}: {exc}") from None


def _read_output(base: Path, ref: str, path: Path, files: dict[str, str]) -> str:
    """An output is a file next to the scenario (``outputs/x.txt``) or inline text. Files are
    read bounded: each at most MAX_OUTPUT bytes (the rest cut with a marker, as a transport
    cuts a host's output), all of them at most SCENARIO_OUTPUT_BUDGET."""
    if "\n" not in ref and (base / ref).is_file():
        if ref not in files:
            files[ref] = read_bounded(base / ref)
            if sum(map(len, files.values())) > SCENARIO_OUTPUT_BUDGET:
                raise ScenarioError(f"{path}: its output files hold more than "
                                    f"{SCENARIO_OUTPUT_BUDGET // (1024 * 1024)} MiB")
        return files[ref]
    if "\n" not in ref and ref.endswith(".txt"):
        raise ScenarioError(f"{path}: output file '{ref}' not found")
    return ref


def _patched(probe: str, ref: dict[str, Any], default: str | None, base: Path, path: Path,
             files: dict[str, str]) -> str:
    """``{sections: {NAME: TEXT}}``: the probe's output (the scenario's default, else the
    baseline) with those sections replaced (``null``: the tool is missing; ``{text, rc}``: a
    failed command), so a scenario spells out only the lines that are wrong."""
    if set(ref) != {"sections"} or not isinstance(ref["sections"], dict):
        raise ScenarioError(f"{path}: outputs.{probe}: a host's output is a file, inline text, "
                            "or {sections: {NAME: TEXT}} patching the baseline")
    if default is None:
        baseline = scenarios_dir() / "_baseline" / f"{probe}.txt"
        if not baseline.is_file():
            raise ScenarioError(f"{path}: outputs.{probe}: no baseline output to patch "
                                f"({baseline.name} is not in _baseline)")
        default = read_bounded(baseline)
    patches: dict[str, tuple[str, int] | None] = {}
    for name, value in ref["sections"].items():
        if value is None:
            patches[str(name)] = None
        elif isinstance(value, dict) and set(value) <= {"text", "rc"}:
            text = _read_output(base, str(value.get("text", "")), path, files)
            patches[str(name)] = (text, int(value.get("rc", 0)))
        else:
            patches[str(name)] = (_read_output(base, str(value), path, files), 0)
    return patch_sections(default, patches)


_MARK_LINE = re.compile(r"^=== diag:(section|rc|missing) (\S+)")


def patch_sections(text: str, patches: dict[str, tuple[str, int] | None]) -> str:
    """*text* (a sectioned probe output) with the named sections replaced; sections it lacks
    are added at its end."""

    def block(name: str) -> list[str]:
        spec = patches[name]
        if spec is None:
            return [f"=== diag:missing {name}"]
        body, rc = spec
        return [f"=== diag:section {name}", *body.rstrip("\n").split("\n"),
                f"=== diag:rc {name} {rc}"] if body.strip() else \
            [f"=== diag:section {name}", f"=== diag:rc {name} {rc}"]

    out: list[str] = []
    skipping: str | None = None
    done: set[str] = set()
    for line in text.splitlines():
        mark = _MARK_LINE.match(line)
        if skipping is not None:
            if mark and mark.group(2) == skipping and mark.group(1) == "rc":
                skipping = None
            continue
        if mark and mark.group(2) in patches and mark.group(2) not in done:
            done.add(mark.group(2))
            out += block(mark.group(2))
            if mark.group(1) == "section":
                skipping = mark.group(2)
            continue
        out.append(line)
    for name in patches:
        if name not in done:
            out += block(name)
    return "\n".join(out) + "\n"


def read_bounded(path: Path) -> str:
    """A recorded output: its first MAX_OUTPUT bytes, with the transports' truncation note."""
    size = path.stat().st_size
    with open(path, "rb") as handle:
        text = handle.read(MAX_OUTPUT).decode("utf-8", errors="replace")
    if size > MAX_OUTPUT:
        text += (f"\n[diag: stdout truncated: {size - MAX_OUTPUT} bytes after the first "
                 f"{MAX_OUTPUT} dropped]\n")
    return text
