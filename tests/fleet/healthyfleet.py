"""A healthy loopback fleet that runs diag's real probe scripts: what diag's own artefacts
(time-outs under load, name lookups, CPU read from a busy machine, storage latency) look like
when nothing is wrong.

Every host runs the scripts on this machine, so what the machine really has (its kernel, mounts,
processes, services, /proc/stat, storage) is read for real. What a GPU node has and this machine
does not is a stand-in printing real recordings (tests/acceptance/standins.py): ``nvidia-smi``,
``ibstat`` and ``modinfo``. Peer names resolve the way a cluster's /etc/hosts or DNS resolves
them: a ``getent`` stand-in answers ``getent ahosts NAME`` for the fleet's own names in glibc's
format, from a hosts file written once the fleet's addresses are known, and hands every other
name to the real ``getent`` (so the lookups still run, bounded by diag, once per name per
asking host).
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.acceptance import standins
from tests.fleet import sshfleet

# getent ahosts prints each address once per socket type (glibc nss/getent.c, ahosts_keys_int).
GETENT = r"""hosts_file="$(dirname "$0")/../../../fleet-hosts"
if [ "$1" = ahosts ] || [ "$1" = hosts ]; then
  addr=$(awk -v n="$2" '$2 == n { print $1; exit }' "$hosts_file")
  if [ -n "$addr" ]; then
    if [ "$1" = hosts ]; then printf '%s      %s\n' "$addr" "$2"; exit 0; fi
    printf '%s       STREAM %s\n%s       DGRAM  \n%s       RAW    \n' "$addr" "$2" "$addr" "$addr"
    exit 0
  fi
fi
exec /usr/bin/getent "$@"
"""

# Other tests running beside these start stand-in training processes on this machine (tests/
# probes/test_logs.py's print CUDA errors), which every loopback "host" would see: the walks
# look for a training process no test starts. The components still read everything else.
PROCESS_PROBES = ("connectivity", "driver", "joblog", "logs", "nccl", "procs", "rdma", "stacks")
# "proces[s]": the pattern matches no command line that merely contains it. Every other test
# worker's walk passes this same pattern, so its scripts' subshells carry the text, and pgrep -f
# found one (with the default memlock limit: "process-memlock-limited" on a healthy node, CI)
NO_SUCH_PROCESS = "diag-test-no-such-training-proces[s]"
NO_TEST_PROCESSES = [arg for probe in PROCESS_PROBES
                     for arg in ("--param", f"{probe}.process_pattern={NO_SUCH_PROCESS}")]


def no_test_processes(params: dict[str, dict[str, object]]) -> dict[str, dict[str, object]]:
    """*params* for a provider, with every process-reading probe looking for no test's process."""
    merged = {probe: {**params.get(probe, {}), "process_pattern": NO_SUCH_PROCESS}
              for probe in PROCESS_PROBES}
    return {**params, **merged}

# A loopback "host" runs its sshd and its scripts on the client's own two cores, beside the
# rest of the suite: an SSH handshake or a script there can take longer than diag's defaults
# (5 s to connect, the probes' own limits) because the *client's* machine is saturated, which
# on a cluster (every host its own CPUs) is not what those limits are for. The walks give the
# loopback fleet the time a slow network would get (--connect-timeout, --timeout); what they
# test is what diag makes of the answers, and of its own name lookups and deadlines.
# The sweep's own per-component limit (sweep_limit_s, 25 s) likewise: a component that is only
# slow because the suite saturates these two cores (three workers beside an 8-host sweep took
# a stand-in nvidia-smi past 25 s: "gpu-driver-hung" on a healthy loopback host) gets 80 s.
_LIMITS = Path(tempfile.mkdtemp(prefix="diag-loopback-limits-")) / "thresholds.yaml"
_LIMITS.write_text("sweep_limit_s: 80\n", encoding="utf-8")
LOOPBACK_LIMITS = ["--connect-timeout", "20", "--timeout", "90", "--thresholds", str(_LIMITS)]

RUNBOOKS = ("hang", "crash", "oom", "launch-failure", "low-bandwidth", "low-utilization",
            "checkpoint-stall", "loss-divergence", "queue-idle", "acceptance")


def tools() -> dict[str, str]:
    """Every host's stand-ins: a healthy GPU node's tools and the cluster's name service."""
    # modinfo: a GPU node has the nvidia module built for its running kernel (this machine's
    # own modinfo, where installed, finds none: every loopback host was "missing" its module)
    return {"nvidia-smi": standins.nvidia_smi(), "ibstat": standins.cat(standins.IBSTAT_1PORT),
            "modinfo": standins.MODINFO, "getent": GETENT}


@contextmanager
def healthy_fleet(hosts: int, prefix: str = "ok") -> Iterator[sshfleet.SSHFleet]:
    """*hosts* loopback sshd hosts ``{prefix}001``... running the real scripts with stand-ins."""
    per_address = 1 if hosts <= 64 else 8
    names = [f"{prefix}{i:03d}" for i in range(1, hosts + 1)]
    fleet = sshfleet.SSHFleet(names, tools={name: tools() for name in names},
                              hosts_per_address=per_address, log_level="INFO")
    with fleet:
        lines = [f"{m.address} {m.name}\n" for m in fleet.members.values()]
        hosts_file = fleet.dir / "fleet-hosts"
        hosts_file.write_text("".join(lines))
        hosts_file.chmod(0o644)
        yield fleet


def accusations(doc: dict[str, Any]) -> dict[str, Any]:
    """What a walk's JSON holds against hosts: standing faults, the conclusion's hosts and the
    evidence it cites, and findings of severity error or critical that name hosts."""
    against: dict[str, Any] = {}
    for fault in doc.get("faults") or ():
        if fault["hosts"]:
            against.setdefault("faults", []).append((fault["code"], fault["hosts"]))
    conclusion = doc.get("conclusion") or {}
    if conclusion.get("hosts"):
        against["conclusion"] = (conclusion.get("id"), conclusion["hosts"])
    cited = [(f["code"], f["hosts"]) for f in conclusion.get("evidence") or () if f["hosts"]]
    if cited:
        against["evidence"] = cited
    serious = [(f["code"], f["hosts"]) for f in doc.get("findings") or ()
               if f.get("severity") in ("error", "critical") and f["hosts"]]
    if serious:
        against["findings"] = serious
    return against


def unread(doc: dict[str, Any]) -> dict[str, list[str]]:
    """The hosts a walk did not read, each with why: a host that did not answer a step, whose
    evidence sweep ran out of time, or one of whose components or probes diag's time-out ended
    ("not measured" for a time-out, not for what a loopback host lacks, e.g. a GPU driver's
    /proc file). A walk that accuses nobody but read nobody is hollow, not a healthy round."""
    why: dict[str, list[str]] = {}
    for host, state in doc["hosts"].items():
        if state["state"] != "ok":
            why.setdefault(host, []).append(f"{state['state']}: {state.get('reason', '')}")
        if state.get("sweep"):
            why.setdefault(host, []).append(f"sweep: {state['sweep']}")
    for finding in doc.get("findings") or ():
        reasons = (finding.get("evidence") or {}).get("reasons") or {}
        if finding["code"] == "not-measured" and reasons:
            for host in finding["hosts"]:
                why.setdefault(host, []).append(f"{finding.get('probe')}: {reasons.get(host)}")
    return why


def summary(runbook: str, doc: dict[str, Any]) -> str:
    """One line per walk for a bench's or a failing test's output."""
    states: dict[str, int] = {}
    for state in doc["hosts"].values():
        states[state["state"]] = states.get(state["state"], 0) + 1
    conclusion = (doc.get("conclusion") or {}).get("id")
    # the serious findings' own words: a failure in CI must say why, not only what
    said = [f"{f['code']}: {f['message'][:300]}" for f in doc.get("findings") or ()
            if f.get("severity") in ("error", "critical") and f["hosts"]]
    return (f"{runbook}: status={doc.get('status')} conclusion={conclusion} "
            f"states={json.dumps(states, sort_keys=True)} against={accusations(doc)} "
            f"unread={len(unread(doc))}" + "".join(f"\n  {line}" for line in said[:5]))
