"""The host options of every command that reaches hosts (DESIGN.md): parsed into the shared
walk seam's ``FleetOptions``, with the operator's files (thresholds, version baseline) and
``--param`` values checked here so a mistake is one clear line."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .common import UsageError, parse_pairs


def probe_params(pairs: Sequence[str]) -> dict[str, dict[str, Any]]:
    """--param storage.path=/ckpt -> {"storage": {"path": "/ckpt"}} (numbers stay numbers)."""
    from assistant import yamlfile

    params: dict[str, dict[str, Any]] = {}
    for key, value in parse_pairs(pairs, "--param").items():
        probe, dot, name = key.partition(".")
        if not dot or not name:
            raise UsageError(f"--param takes PROBE.KEY=VALUE, got '{key}={value}'")
        try:
            params.setdefault(probe, {})[name] = yamlfile.load(value).data
        except yamlfile.YamlError as exc:
            raise UsageError(f"--param {key}: the value is not a YAML value ({exc.message}); "
                             "quote it") from None
    return params


def fleet_options(args: argparse.Namespace) -> Any:
    """The host options of ``run``/``probe`` as the shared walk seam takes them."""
    from assistant.walks import FleetOptions
    from probes.base import ThresholdsError, load_thresholds

    try:
        thresholds = load_thresholds(Path(args.thresholds) if args.thresholds else None)
    except ThresholdsError as exc:
        raise UsageError(str(exc)) from None
    params = probe_params(args.param)
    if args.baseline:
        params.setdefault("versions", {})["baseline"] = version_baseline(args.baseline)
    return FleetOptions(hosts=args.hosts, inventory=args.inventory, scenario=args.scenario,
                        job=getattr(args, "job", None), transport=args.transport,
                        slurm_timeout=getattr(args, "slurm_timeout", None),
                        accept_new_host_keys=args.accept_new_host_keys,
                        connect_timeout=args.connect_timeout, concurrency=args.concurrency,
                        workers=args.workers,
                        timeout=args.timeout, deadline=args.deadline, thresholds=thresholds,
                        params=params, logs=args.logs,
                        monitoring=monitoring_plan(args))


def monitoring_plan(args: argparse.Namespace) -> Any:
    """The walk's monitoring step (issue 26), for commands with --prometheus; a scenario's
    walk is simulated and reads no Prometheus."""
    if not hasattr(args, "prometheus") or args.scenario:
        return None
    from assistant.monitoring.step import MonitoringPlan, MonitoringStep

    from .monitoring import prom_config, window_bounds

    config = prom_config(args)
    say = lambda line: print(f"diag: {line}", file=sys.stderr, flush=True)  # noqa: E731
    if config is None:
        return MonitoringPlan(None, say)
    since, start, end = window_bounds(args)
    return MonitoringPlan(MonitoringStep(config, since=since, start=start, end=end,
                                         since_given=bool(args.since)), say)


def open_target(options: Any) -> Any:
    """The target, with what its known_hosts policy has to say said on stderr: lines it skipped
    (once, now) and every key it records because of --accept-new-host-keys (as it happens,
    with the fingerprint to compare against the host's own)."""
    from assistant.target import TargetError

    try:
        target = options.open()
    except TargetError as exc:
        raise UsageError(str(exc)) from None
    for policy in target.host_keys:
        for warning in dict.fromkeys(policy.warnings):
            print(f"diag: warning: {warning}", file=sys.stderr)
        policy.on_accept = lambda key: print(f"diag: {key}", file=sys.stderr, flush=True)
    return target


def version_baseline(path: str) -> dict[str, str]:
    """A pinned version baseline: {kernel: ..., driver_version: ..., nccl_version: ...}."""
    from assistant import yamlfile
    from probes.catalog import load_catalog

    try:
        data = yamlfile.load_file(path).data
    except yamlfile.YamlFileError as exc:
        raise UsageError(f"--baseline {exc}") from None
    known = load_catalog().probes["versions"].facts
    if not isinstance(data, dict) or not data:
        raise UsageError(f"--baseline {path}: expected a mapping such as driver_version: 550.90.07")
    unknown = sorted(set(data) - set(known))
    if unknown:
        raise UsageError(f"--baseline {path}: unknown key(s) {', '.join(unknown)} "
                         f"(known: {', '.join(known)})")
    return {key: str(value) for key, value in data.items()}


def _workers(text: str) -> int | None:
    if text == "auto":
        return None
    try:
        count = int(text)
    except ValueError:
        count = 0
    if count < 1:
        raise argparse.ArgumentTypeError(f"expected a number of workers (1 or more) or auto, "
                                         f"got '{text}'")
    return count


def add_host_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("hosts")
    g.add_argument("--hosts", metavar="EXPR", help="hosts, Slurm hostlist syntax: gpu[001-016]")
    g.add_argument("--inventory", metavar="FILE", help="inventory YAML (docs/inventory-format.md)")
    g.add_argument("--job", metavar="ID",
                   help="a Slurm job: its nodes are the hosts (a pending job: the nodes it "
                        "waits for), its state, partition, GRES and nodes are recorded")
    g.add_argument("--scenario", metavar="NAME",
                   help="replay a simulated incident from fixtures/scenarios (no SSH)")
    g.add_argument("--transport", choices=("ssh", "slurm", "local"), default=None,
                   help="ssh (default), slurm (srun inside --job's allocation; the default "
                        "with --job for hosts the inventory does not list) or local (run on "
                        "this machine)")
    g.add_argument("--slurm-timeout", type=float, default=None, metavar="S",
                   help="seconds each Slurm query may take when resolving --job (default 5)")
    g.add_argument("--concurrency", type=int, default=64, help="hosts at once (default 64)")
    g.add_argument("--workers", type=_workers, default=None, metavar="N|auto",
                   help="worker processes the hosts are sharded over, each with its hosts' SSH "
                        "connections, parsing and per-host checks (default auto: one per core "
                        "when there are at least 64 hosts per worker; 1: this process alone)")
    g.add_argument("--timeout", type=float, default=None,
                   help="seconds per host and command (default: the probe's own)")
    g.add_argument("--deadline", type=float, default=120.0,
                   help="seconds for a whole step; hosts not done by then are 'timeout'")
    g.add_argument("--connect-timeout", type=float, default=5.0, help="SSH connect timeout")
    g.add_argument("--accept-new-host-keys", action="store_true",
                   help="accept and record unknown SSH host keys (changed keys are still refused)")
    g.add_argument("--thresholds", metavar="FILE", help="override check thresholds (YAML)")
    g.add_argument("--baseline", metavar="FILE",
                   help="pinned versions (YAML: driver_version: ..., nccl_version: ...); hosts "
                        "that differ raise version-baseline-mismatch")
    g.add_argument("--logs", metavar="GLOB",
                   help="the training job's logs on each node, e.g. '/shared/job-1234/rank*.log' "
                        "(rank progress, OOM/NaN/rendezvous lines, NCCL's transport)")
    g.add_argument("--param", action="append", default=[], metavar="PROBE.KEY=VALUE",
                   help="probe parameter, e.g. storage.path=/checkpoints (repeatable)")
