"""The probe provider the engine talks to: probes fanned out over a transport.

For each probe of a step: build its script, fan it out, parse each host's output (a parse
failure marks that host ``parse-error``, never the run), run the per-host and fleet checks,
and hand the engine one ``ProbeOutcome``. Connections live in the transport, so every probe
of a walk reuses them.
"""

from __future__ import annotations

import dataclasses
import shlex
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from assistant.fleet.fanout import fan_out
from assistant.fleet.transport import CommandResult, Transport
from probes import hangstate
from probes.base import Context, Probe, get_probe, running_section
from probes.catalog import load_catalog
from probes.faults.apply import attach_log_lines
from probes.model import Finding, HostResult, ProbeOutcome
from probes.parsers import ParseError

from . import events as ev
from .judging import judge_fleet, judge_hosts
from .memtrim import release_freed_memory
from .model import CONFIRMED_ACTIVE as CONFIRMED
from .outputs import Outputs

RAW_OUTPUT_LIMIT = 64 * 1024  # what is kept of each host's output for the record


class FleetProvider:
    def __init__(self, transport: Transport, *,
                 attrs: Mapping[str, Mapping[str, Any]] | None = None,
                 thresholds: Mapping[str, Any] | None = None,
                 params: Mapping[str, Mapping[str, Any]] | None = None,
                 concurrency: int = 64, timeout: float | None = None, deadline: float = 120.0,
                 cancel: threading.Event | None = None, override_idle: bool = False) -> None:
        from probes.base import load_thresholds

        self.transport = transport
        self.attrs = dict(attrs or {})
        self.thresholds = dict(thresholds or load_thresholds())
        self.params = {k: dict(v) for k, v in (params or {}).items()}  # operator's --param
        self.concurrency = concurrency
        self.timeout = timeout
        self.deadline = deadline
        self.cancel = cancel or threading.Event()
        self.override_idle = override_idle  # the operator's --override-idle for active tests
        self.raw = Outputs()  # (probe, host) -> bounded raw output, kept compressed
        # probe -> host -> samples an interrupted soak recorded (runbook.sampling resumes them)
        self.prior_samples: dict[str, dict[str, list[dict[str, Any]]]] = {}
        # Hosts that could not be reached at all in this walk, with that first failure: later
        # probes skip them (an outage of 50 hosts cost 50 connect timeouts per probe) until
        # retry_dead() tries them once more.
        self.dead: dict[str, CommandResult] = {}
        # What the evidence sweep read, per (probe, host): the script it ran and the result; a
        # step running the same script on that host reuses it (runbook/sweeping.py).
        self.swept: dict[tuple[str, str], tuple[str, HostResult]] = {}
        # Hosts whose CPUs the sweep found saturated: there a command that does not finish in
        # time is slow or stuck, and only a process blocked in the kernel says which
        # (probes/hangstate.py); a step's own time-out, which has no process states, is not.
        self.saturated: set[str] = set()
        # A shard of a sharded walk (assistant/probeworker/shards.py): per-host checks only.
        self.hosts_only = False

    def run_sweep(self, components: Sequence[str], hosts: Sequence[str],
                  params: Mapping[str, Mapping[str, Any]],
                  emit: Callable[[ev.Event], None]) -> list[ProbeOutcome]:
        """The evidence sweep: every component in one round trip per host."""
        from .sweeping import run_sweep

        try:
            return run_sweep(self, components, hosts, params, emit)
        finally:
            release_freed_memory()  # the outputs' text, parsed and dropped

    def run_probes(self, probes: Sequence[str], hosts: Sequence[str],
                   params: Mapping[str, Mapping[str, Any]],
                   emit: Callable[[ev.Event], None]) -> list[ProbeOutcome]:
        return run_in_order(self.run_probe, probes, hosts, params, emit)

    def run_probe(self, name: str, hosts: Sequence[str], params: Mapping[str, Any],
                  emit: Callable[[ev.Event], None]) -> ProbeOutcome:
        try:
            return self._run_probe(name, hosts, params, emit)
        finally:
            release_freed_memory()  # the outputs' text, parsed and dropped

    def _run_probe(self, name: str, hosts: Sequence[str], params: Mapping[str, Any],
                   emit: Callable[[ev.Event], None]) -> ProbeOutcome:
        merged = {"peers": list(hosts), **params, **self.params.get(name, {})}
        ctx = Context(self.thresholds, self.attrs, merged)
        try:
            probe = get_probe(name)
        except KeyError:
            return self._unavailable(name, hosts, emit)
        if probe.active and params.get(CONFIRMED) is not True:
            return self._not_confirmed(name, hosts, emit)
        if probe.summarize is not None:  # a sampler (soak): rounds until its duration ends
            from .sampling import run_sampled

            return run_sampled(self, probe, hosts, ctx, emit)
        outcome = ProbeOutcome(name, self.collect(probe, hosts, ctx, emit))
        return self.judge(probe, outcome, ctx)

    def collect(self, probe: Probe, hosts: Sequence[str], ctx: Context,
                emit: Callable[[ev.Event], None]) -> dict[str, HostResult]:
        """Run *probe* once on every host and parse each answer (figures judged as each host
        answers, so a front end can show them at once): host -> result, in *hosts* order."""
        name, merged = probe.name, ctx.params
        collected: dict[str, HostResult] = {}
        script = probe.command(merged)
        if script is None:  # nothing to run: facts are the inventory's (e.g. placement)
            for host in hosts:
                collected[host] = HostResult(host, "ok", dict(self.attrs.get(host, {})))
                emit(ev.ProbeFinished(name, host, "ok"))
            return collected
        # Names the probe in the remote's process list and auth log: an admin who sees diag's
        # script on a node can tell at once what it is, and whether it only reads.
        what = "loads the node: acceptance test" if probe.active else "read-only"
        header = f"# diag probe: {name} ({what})\n"
        command: str | Callable[[str], str] = header + script
        if probe.per_host:  # one script per host, built with that host's name
            command = lambda host: header + (probe.command({**merged, "host": host}) or "")  # noqa: E731
        for host in hosts:
            emit(ev.ProbeStarted(name, host))
        lock = threading.Lock()
        closed = False

        def finished(result: CommandResult) -> None:
            with lock:
                # A straggler thread answering after the deadline changes nothing, and a host
                # the fan-out already reported is not read again (the loop below passes every
                # live host: each one's output was parsed twice).
                if closed or result.host in collected:
                    return
            host_result = self._host_result(name, probe.parse, result)
            with lock:
                if closed or result.host in collected:
                    return
                collected[result.host] = host_result
            if host_result.state == "ok" and probe.figures is not None:
                figures = probe.figures(result.host, host_result.facts, ctx)
                host_result.facts["figures"] = figures
                emit(ev.FiguresReady(name, result.host, tuple(figures)))
            emit(ev.ProbeFinished(name, result.host, host_result.state, host_result.reason,
                                  result.duration_s))

        for host in [h for h in hosts if h in self.dead]:
            finished(self._skipped(self.dead[host]))
        for host in self._reusable(probe, hosts, script):
            # the sweep ran this very script on the host at the start of the walk
            reused = self.swept[(name, host)][1]
            with lock:
                collected[host] = reused
            emit(ev.ProbeFinished(name, host, reused.state, reused.reason, 0.0))
        live = [h for h in hosts if h not in self.dead and h not in collected]
        if probe.active:
            results = self._run_active(probe, live, header + script, merged, finished)
        else:
            results = fan_out(self.transport, live, command, label=name,
                              concurrency=self.concurrency,
                              timeout=self.timeout or probe.timeout_s, deadline=self.deadline,
                              cancel=self.cancel, on_result=finished, drop_read_output=True)
        for host in live:  # hosts the deadline or a cancel ended never reached on_result
            finished(results[host])
        with lock:
            closed = True
        return {host: collected[host] for host in hosts}

    def _reusable(self, probe: Probe, hosts: Sequence[str], script: str) -> list[str]:
        """Hosts where the sweep already ran exactly this script of *probe* and read its
        output (a host whose output could not be read, or that timed out, is asked again)."""
        if probe.per_host or probe.active or not self.swept:
            return []
        return [h for h in hosts if h not in self.dead and (h_swept := self.swept.get(
                (probe.name, h))) is not None and h_swept[0] == script
                and h_swept[1].state == "ok"]

    def judge(self, probe: Probe, outcome: ProbeOutcome, ctx: Context) -> ProbeOutcome:
        """Per-host and fleet checks over the collected results, the fault catalogue, and
        where findings gather. A shard's worker (``hosts_only``) runs the per-host checks
        alone: the fleet's are the walk's, over every shard's hosts."""
        judge_hosts(probe, outcome, ctx)
        if not self.hosts_only:
            return judge_fleet(probe, outcome, ctx, self.attrs)
        from probes.faults.apply import judge_hosts as catalogue_hosts

        ok_facts = {h: r.facts for h, r in outcome.hosts.items() if r.state == "ok"}
        outcome.unfolded = catalogue_hosts(probe.name, ok_facts, ctx.thresholds)
        return outcome

    def _run_active(self, probe: Probe, hosts: Sequence[str], command: str,
                    params: Mapping[str, Any],
                    finished: Callable[[CommandResult], None]) -> dict[str, CommandResult]:
        """An active test, told the node's name and the operator's override. Bounded: the
        transport runs every command in its own process group under a host-side time limit
        and kills the group on timeout or cancel (fleet.remoteproc), so a cancelled burn does
        not hold the GPUs. A client-side one (a multi-node launcher) runs once and every host
        reads that one output. The operator's ``--timeout`` bounds it too: a test that hangs
        (a wedged GPU) is ended then, on the host, rather than after the probe's own limit."""
        limit = float(params.get("limit_s") or (probe.limit_s(params) if probe.limit_s
                                                  else probe.timeout_s))
        if self.timeout:
            limit = min(limit, self.timeout)
        override = "export DIAG_IDLE_OVERRIDE=1\n" if self.override_idle else ""

        def text(host: str) -> str:
            return f"export DIAG_NODE={shlex.quote(host)}\n{override}{command}"

        deadline = max(self.deadline, limit + 60.0)
        if probe.runs_on != "client":
            return fan_out(self.transport, hosts, text, label=probe.name,
                           concurrency=self.concurrency, timeout=limit, deadline=deadline,
                           cancel=self.cancel,
                           on_result=lambda r: finished(r) if r.state == "ok" else None)
        reader = hosts[0]
        once = fan_out(self.transport, [reader], text, label=probe.name, timeout=limit,
                       deadline=deadline, cancel=self.cancel)[reader]
        results = {}
        for host in hosts:
            results[host] = dataclasses.replace(once, host=host)
            finished(results[host])
        return results

    def _not_confirmed(self, name: str, hosts: Sequence[str],
                       emit: Callable[[ev.Event], None]) -> ProbeOutcome:
        """An active probe asked for without the walk's confirmation: nothing runs."""
        outcome = ProbeOutcome(name)
        for host in hosts:
            outcome.hosts[host] = HostResult(host, "ok", {"refused": "not confirmed"})
            emit(ev.ProbeFinished(name, host, "ok", "not confirmed"))
        info = load_catalog().codes["active-test-not-confirmed"]
        outcome.findings.append(Finding(
            "active-test-not-confirmed", info.severity, tuple(hosts),
            f"{name} loads the nodes and was not confirmed: nothing ran", name,
            {"what": name}))
        return outcome

    def retry_dead(self, timeout: float | None = None) -> list[str]:
        """Try every host marked dead once more (a trivial command); the ones that answer are
        no longer skipped. Returns them. The TUI's retry and the end of a walk call this."""
        if not self.dead:
            return []
        hosts = list(self.dead)
        results = fan_out(self.transport, hosts, "true", label="reconnect",
                          concurrency=self.concurrency, timeout=timeout or 10.0,
                          deadline=self.deadline, cancel=self.cancel)
        back = [h for h in hosts if results[h].state == "ok"]
        for host in back:
            del self.dead[host]
        return back

    @staticmethod
    def _skipped(first: CommandResult) -> CommandResult:
        return CommandResult(first.host, first.state, phase="connect",
                             reason=f"{first.reason} (earlier in this walk; not tried again)")

    def _host_result(self, name: str, parse: Callable[[str], dict[str, Any]],
                     result: CommandResult) -> HostResult:
        self.raw[(name, result.host)] = result.stdout[:RAW_OUTPUT_LIMIT]
        if result.connect_failed:
            self.dead.setdefault(result.host, result)
        if result.state != "ok":
            section = ""
            reason = result.reason
            if result.state == "timeout" and result.phase == "command":
                # diag got in and the script hung: its partial output names the section, and
                # the catalog what runs there ("nvidia-smi"), so the reason says what hung.
                section = running_section(result.stdout) or ""
                hang = load_catalog().probes[name].hangs.get(section) \
                    if name in load_catalog().probes else None
                where = (f"in {hang.what} (section '{section}')" if hang else
                         f"in section '{section}'" if section else "between sections")
                reason = f"logged in, then the {name} probe hung {where}: {result.reason}"
                return self._timed_out(name, result, reason, section)
            return HostResult(result.host, result.state, reason=reason,
                              duration_s=result.duration_s, phase=result.phase,
                              section=section)
        try:
            facts = parse(result.stdout)
            logs = load_catalog().probes[name].logs if name in load_catalog().probes else {}
            if logs:  # the lines the fault catalogue's log signatures read
                attach_log_lines(result.stdout, logs, facts)
        except Exception as exc:  # one host's odd output never ends the run
            reason = str(exc) if isinstance(exc, ParseError) else \
                f"{name}: cannot read the output ({type(exc).__name__}: {exc})"
            if result.exit_status not in (0, None):
                reason += f" (exit status {result.exit_status}: {result.stderr.strip()[:200]})"
            return HostResult(result.host, "parse-error", reason=reason,
                              duration_s=result.duration_s)
        return HostResult(result.host, "ok", facts, duration_s=result.duration_s)

    def _timed_out(self, name: str, result: CommandResult, reason: str,
                   section: str = "") -> HostResult:
        """A command that diag's own time-out ended after it logged in (a step's command, or
        the whole sweep), with *reason*: read by what its processes were doing."""
        verdict, shown = self._hang_verdict(name, result)
        return HostResult(result.host, result.state,
                          hangstate.facts(verdict, shown, result.processes),
                          reason + hangstate.explain(verdict, shown, result.host,
                                                     hangstate.given_s(result.reason)),
                          result.duration_s, result.phase, section)

    def _time_needed(self, name: str) -> float | None:
        """The time diag's own data gives *name* (the sweep's component limit, a probe's
        time-out): an operator's shorter --timeout / --deadline cut it, not the host."""
        if name == "sweep":
            return float(self.thresholds.get("sweep_limit_s", 25))
        try:
            return float(get_probe(name).timeout_s)
        except (KeyError, TypeError, ValueError):
            return None

    def _hang_verdict(self, name: str, result: CommandResult
                      ) -> tuple[hangstate.Verdict, list[hangstate.Process]]:
        """A step's command that diag's time-out ended, read by its processes
        (probes/hangstate.py); what the sweep saw blocked on this host stays blocked."""
        verdict, shown = hangstate.judge(result.processes,
                                         hangstate.blocked_states(self.thresholds),
                                         result.host in self.saturated,
                                         hangstate.given_s(result.reason),
                                         self._time_needed(name))
        swept = self.swept.get((name, result.host))
        if verdict != "blocked" and swept is not None and \
                swept[1].facts.get("hang_verdict") == "blocked":
            return "blocked", hangstate.processes(swept[1].facts.get("processes") or ())
        return verdict, shown

    def _unavailable(self, name: str, hosts: Sequence[str],
                     emit: Callable[[ev.Event], None]) -> ProbeOutcome:
        """A catalog probe this build cannot run yet: said plainly, never a silent pass."""
        outcome = ProbeOutcome(name)
        for host in hosts:
            outcome.hosts[host] = HostResult(host, "ok")
            emit(ev.ProbeFinished(name, host, "ok", "not available"))
        info = load_catalog().codes["not-measured"]
        outcome.findings.append(Finding(
            "not-measured", info.severity, tuple(hosts),
            f"probe '{name}' is not available in this version of diag; nothing was measured",
            name, {"what": name, "why": "not available"}))
        return outcome


def run_in_order(run_probe: Callable[..., ProbeOutcome], probes: Sequence[str],
                 hosts: Sequence[str], params: Mapping[str, Mapping[str, Any]],
                 emit: Callable[[ev.Event], None],
                 stop: threading.Event | None = None) -> list[ProbeOutcome]:
    """A step's probes one after the other, each given the facts of the probes it builds on
    that ran before it (``with_facts``); every provider runs a step this way, so none can
    leave the facts out. *stop*, once set, runs no further probe."""
    outcomes: list[ProbeOutcome] = []
    for name in probes:
        if stop is not None and stop.is_set():
            break
        outcomes.append(run_probe(name, hosts, with_facts(name, params, outcomes), emit))
    return outcomes


def with_facts(name: str, params: Mapping[str, Mapping[str, Any]],
               earlier: Sequence[ProbeOutcome]) -> dict[str, Any]:
    """The step's parameters of probe *name*, with the facts of the probes it builds on
    (``Probe.uses``) that ran *earlier* in the step."""
    step_params = dict(params.get(name, {}))
    uses = _uses(name)
    if uses:
        step_params["facts"] = {o.probe: {h: r.facts for h, r in o.hosts.items()
                                          if r.state == "ok"}
                                for o in earlier if o.probe in uses}
    return step_params


def _uses(name: str) -> tuple[str, ...]:
    try:
        return get_probe(name).uses
    except KeyError:
        return ()
