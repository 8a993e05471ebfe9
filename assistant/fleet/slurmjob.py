"""Slurm job lookup: ``--job ID`` to the job's nodes and the incident's context.

Most GPU clusters diag serves are scheduled by Slurm, and the operator's first fact in an
incident is a job id. :func:`lookup_job` turns it into the job's nodes and context (state,
partition, start time, GRES, node list) with ``scontrol show job -o``, expanded with
python-hostlist like every other host expression. **Every Slurm call is bounded**: with a
wrong ``SLURM_CONF`` or a dead controller ``scontrol`` retries for about a minute before
failing, and an operator at 3 a.m. must get one clear line within seconds instead.

Running probes inside the job is ``assistant.fleet.slurm`` (srun); the environment rules
(:func:`slurm_env`) are shared with it.

The lookup also keeps where the batch step writes the job's output (StdOut/StdErr), so the
sweep's ``logs`` component can read it on the batch host: :meth:`JobInfo.logs_params`.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from assistant.fleet.hostexpr import InventoryError, expand_hosts

DEFAULT_LOOKUP_TIMEOUT = 5.0  # seconds for scontrol/sinfo when resolving --job
# Environment variables a client keeps. Inside an allocation (an salloc shell) the job's
# SLURM_JOB_ID, SLURM_NTASKS, ... would make srun join *that* job or inherit its task layout.
_KEEP_ENV = ("SLURM_CONF", "SLURM_CLUSTERS")
_JOB_ID = re.compile(r"^\d+(?:_\d+)?$")


class SlurmError(Exception):
    """Slurm could not answer, or the job cannot be used: one line for the operator."""


def slurm_env(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """*env* (default: ours) without the SLURM_* variables of any enclosing job."""
    base = dict(os.environ if env is None else env)
    return {k: v for k, v in base.items() if not k.startswith("SLURM_") or k in _KEEP_ENV}


def run_command(argv: Sequence[str], timeout: float,
                env: Mapping[str, str] | None = None) -> tuple[int, str, str]:
    """Run a Slurm client command; (exit status, stdout, stderr). SlurmError if it is not
    installed or does not answer within *timeout* (its process group is killed)."""
    try:
        proc = subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=slurm_env(env),
                                start_new_session=True)
    except FileNotFoundError:
        raise SlurmError(f"{argv[0]} not found: the Slurm client is not installed on this "
                         "machine (or not on PATH)") from None
    except OSError as exc:
        raise SlurmError(f"cannot run {argv[0]}: {exc.strerror}") from None
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        conf = os.environ.get("SLURM_CONF") if env is None else env.get("SLURM_CONF")
        raise SlurmError(f"Slurm did not answer `{' '.join(argv)}` within {timeout:g}s: is "
                         f"slurmctld up and SLURM_CONF right ({conf or 'default config'})?"
                         ) from None
    return proc.returncode, out, err


@dataclass
class JobInfo:
    """What Slurm says about a job: the hosts to probe and the incident's context."""

    id: str
    state: str
    nodes: list[str]
    nodelist: str | None = None
    partition: str | None = None
    start_time: str | None = None
    end_time: str | None = None
    submit_time: str | None = None
    gres: str | None = None
    num_nodes: int | None = None
    user: str | None = None
    name: str | None = None
    reason: str | None = None
    time_limit: str | None = None
    fields: dict[str, Any] = field(default_factory=dict)
    # The batch step's output files as scontrol prints them (filename patterns of man sbatch,
    # some fields left unexpanded by older Slurm), and the node the batch step runs on.
    stdout: str | None = None
    stderr: str | None = None
    batch_host: str | None = None

    @property
    def running(self) -> bool:
        """Whether steps can run in it (srun --jobid needs a live allocation)."""
        return self.state in ("RUNNING", "SUSPENDED", "COMPLETING", "CONFIGURING",
                              "SIGNALING", "STAGE_OUT", "RESIZING")

    def output_patterns(self) -> list[str]:
        """StdOut and StdErr of the batch step with every job field expanded here (%A %a %b %j
        %J %s %u %x %r, and %n %t, which are 0 in the batch step); %N (the batch host's short
        name) and %% are left for the host to expand (probes.logs_script.slurm_word)."""
        found: list[str] = []
        for raw in (self.stdout, self.stderr):
            expanded = expand_output(raw, self)
            if expanded and expanded not in found:
                found.append(expanded)
        return found

    def start_epoch(self) -> int | None:
        """When the job (its latest run, after a requeue) started, in seconds since the epoch:
        scontrol prints StartTime in this machine's local time ("%Y-%m-%dT%H:%M:%S" unless
        SLURM_TIME_FORMAT asks otherwise: then None, not a guess)."""
        import datetime

        text = (self.start_time or "").strip()
        try:
            return int(datetime.datetime.strptime(text, "%Y-%m-%dT%H:%M:%S").timestamp())
        except (ValueError, OverflowError, OSError):
            return None

    def logs_params(self) -> dict[str, Any]:
        """The ``logs`` component's params for this job: the batch output patterns, read on the
        batch host only (one file, where slurmstepd wrote it), the job's nodes, and when it
        started (a file last written before then is an earlier run's)."""
        if not self.running:  # a pending job has written nothing yet
            return {}
        params: dict[str, Any] = {}
        start = self.start_epoch()
        if start is not None:
            params["job_start_epoch"] = start
        patterns = self.output_patterns()
        if not patterns:
            return params
        params.update({"slurm_output": patterns, "slurm_nodes": list(self.nodes)})
        if self.batch_host:
            params["slurm_batch_host"] = self.batch_host
        return params

    def context(self) -> dict[str, Any]:
        """The incident context recorded with the session (JSON-able)."""
        return {"id": self.id, "state": self.state, "partition": self.partition,
                "start_time": self.start_time, "submit_time": self.submit_time,
                "gres": self.gres, "nodelist": self.nodelist, "num_nodes": self.num_nodes,
                "user": self.user, "name": self.name, "reason": self.reason,
                "time_limit": self.time_limit}


_NO_VAL = 4294967294  # Slurm's NO_VAL: what %a gives in a job that is not an array
_SPEC = re.compile(r"%(\d*)([%A-Za-z])")
_NULL = ("", "(null)", "/dev/null", "none", "n/a", "unknown")


def _field(record: Mapping[str, Any], key: str) -> str | None:
    value = str(record.get(key) or "").strip()
    return None if value.lower() in _NULL else value


def _number(record: Mapping[str, Any], key: str) -> int | None:
    value = str(record.get(key) or "").strip()
    return int(value) if value.isdecimal() else None


def expand_output(path: str | None, job: JobInfo) -> str | None:
    """One StdOut/StdErr pattern of the batch step with its job fields expanded, as slurmstepd
    does (``expand_stdio_fields`` in src/common/print_fields.c, ``_batch_path_check`` in
    src/slurmd/common/fname.c): a number after % zero-pads (at most 10), a backslash anywhere
    turns expansion off. Older scontrol (before 25.11) printed %A %a %j %u %x expanded and
    the rest as written; newer prints it all expanded. %N and %% are kept for the host, a
    letter Slurm does not know is kept as written. None for /dev/null or no file."""
    if not path or path.strip().lower() in _NULL:
        return None
    path = path.strip()
    record = job.fields
    if "\\" in path:  # no expansion at all; the host must not expand it either
        return path.replace("\\", "").replace("%", "%%")
    job_id = _number(record, "JobId")
    if job_id is None and job.id.split("_")[0].isdecimal():
        job_id = int(job.id.split("_")[0])
    array_job = _number(record, "ArrayJobId")
    array_task = _number(record, "ArrayTaskId")
    values: dict[str, Any] = {
        "A": array_job if array_job is not None else job_id,
        "a": array_task if array_task is not None else _NO_VAL,
        "b": (array_task if array_task is not None else _NO_VAL) % 10,
        "j": job_id, "J": job_id, "s": "batch", "u": job.user, "x": job.name,
        "r": _number(record, "Restarts") or 0, "n": 0, "t": 0,
    }

    def one(m: re.Match[str]) -> str:
        width, letter = m.group(1), m.group(2)
        if letter in ("%", "N") or letter not in values:
            return m.group(0)
        value = values[letter]
        if value is None:
            return m.group(0)  # unknown here (no user name): the host refuses it, safely
        if isinstance(value, int):
            return f"{value:0{min(int(width), 10)}d}" if width else str(value)
        return str(value)

    expanded = _SPEC.sub(one, path)
    if not expanded.startswith("/") and _field(record, "WorkDir"):
        expanded = f"{str(record['WorkDir']).rstrip('/')}/{expanded}"
    return expanded


def _expand(expr: str) -> list[str]:
    try:
        return expand_hosts(expr)
    except InventoryError as exc:
        raise SlurmError(f"Slurm gave a node list diag cannot read ({expr}): {exc}") from None


def lookup_job(job_id: str, *, timeout: float = DEFAULT_LOOKUP_TIMEOUT,
               env: Mapping[str, str] | None = None) -> JobInfo:
    """The job's nodes and context; SlurmError (one line) if it does not exist, has ended,
    or Slurm does not answer within *timeout*.

    A running job's hosts are its allocation. A pending job has none yet: its hosts are the
    nodes it asked for (ReqNodeList), else its partition's nodes — the ones it waits for, which
    is what the queue-idle runbook looks at.
    """
    from probes.parsers import ParseError, parse

    job_id = str(job_id).strip()
    if not _JOB_ID.match(job_id):
        raise SlurmError(f"--job takes a Slurm job id such as 1234 or 1234_7, not '{job_id}'")
    rc, out, err = run_command(["scontrol", "show", "job", "-o", job_id], timeout, env)
    if rc != 0:
        message = (err.strip() or out.strip()).splitlines()
        first = message[0] if message else f"exit status {rc}"
        if "invalid job id" in first.lower():
            raise SlurmError(f"job {job_id} does not exist (or ended long enough ago that "
                             "Slurm no longer lists it)")
        raise SlurmError(f"`scontrol show job {job_id}` failed: {first}")
    try:
        jobs = parse("scontrol-job", out)["jobs"]
    except ParseError as exc:
        raise SlurmError(f"cannot read `scontrol show job {job_id}`: {exc}") from None
    exact = [j for j in jobs if j["job_id"] == job_id] or jobs
    live = [j for j in exact if not j["ended"]]
    if not live:
        job = exact[0]
        when = f" at {job['end_time']}" if job.get("end_time") else ""
        which = f" ({job['nodelist']})" if job.get("nodelist") else ""
        raise SlurmError(f"job {job_id} has ended ({job['state']}{when}); its nodes{which} may "
                         "run other jobs now: give --hosts to probe them")
    job = live[0]
    nodes: list[str] = []
    for j in live:  # an array job id can stand for several running tasks
        if j.get("nodelist"):
            nodes += [n for n in _expand(j["nodelist"]) if n not in nodes]
    info = JobInfo(id=job_id, state=job["state"], nodes=nodes, nodelist=job.get("nodelist"),
                   partition=job.get("partition"), start_time=job.get("start_time"),
                   end_time=job.get("end_time"), submit_time=job.get("submit_time"),
                   gres=job.get("gres") or job.get("tres_per_job"),
                   num_nodes=job.get("num_nodes"), user=job.get("user"), name=job.get("name"),
                   reason=job.get("reason"), time_limit=job.get("time_limit"),
                   fields=dict(job.get("fields") or {}), batch_host=job.get("batch_host"))
    record = info.fields
    if str(record.get("BatchFlag", "1")).strip() != "0":  # an salloc/srun job has no batch step
        info.stdout = _field(record, "StdOut")
        info.stderr = _field(record, "StdErr")
    if not info.nodes:
        requested = (job.get("fields") or {}).get("ReqNodeList", "")
        if requested and requested != "(null)":
            info.nodes = _expand(requested)
        elif info.partition:
            info.nodes = partition_nodes(info.partition.split(","), timeout=timeout, env=env)
    if not info.nodes:
        raise SlurmError(f"job {job_id} is {info.state} and Slurm names no node for it")
    return info


def partition_nodes(partitions: Sequence[str], *, timeout: float = DEFAULT_LOOKUP_TIMEOUT,
                    env: Mapping[str, str] | None = None) -> list[str]:
    """Every node of the given partitions (``sinfo -h -p P -o %N``), in Slurm's order."""
    rc, out, err = run_command(["sinfo", "-h", "-p", ",".join(partitions), "-o", "%N"],
                               timeout, env)
    if rc != 0:
        raise SlurmError(f"`sinfo -p {','.join(partitions)}` failed: "
                         f"{(err.strip() or out.strip() or f'exit status {rc}').splitlines()[0]}")
    nodes: list[str] = []
    for line in out.split():
        nodes += [n for n in _expand(line) if n not in nodes]
    return nodes
