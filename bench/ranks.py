"""Benchmark: finding the straggler among 1,024 ranks' logs (100 MB in all), single process.

Not a test: run it by hand to see what the analysis costs at scale::

    .venv/bin/python bench/ranks.py                 # 1,024 ranks, 100 MB
    .venv/bin/python bench/ranks.py 4096 400        # ranks, total MB
    .venv/bin/python bench/ranks.py --shape megatron 512 50   # one collection shape

It writes one log per rank (torchrun ``--log-dir`` style, ~100 KB each): NCCL's init lines,
then realistic noise (training steps, NCCL channel/connection INFO lines, Python warnings,
data loader messages) and, at the end, PyTorch 2.4's watchdog lines — 1,023 ranks time out at
the same work, one rank (the straggler) never issued it. Timed, one process each:

- python: ``probes.rankfiles.read_local`` — newest files, head/tail of each, the same EREs as the
  node's grep, then the analysis (what ``diag parse``/a local ``--logs`` run costs);
- shell: the probe's own script run by ``sh`` on this machine (ls/head/tail/grep per file),
  then ``parse`` and the fleet merge (what one node costs, plus the analysis).

The generator is also what the tests use for their 64-rank log sets (``job``) and, in every
shape operators collect logs in (``shaped_job``: kubectl --timestamps, journald, syslog,
torchrun --tee, srun --label, mpirun, MPICH/Intel MPI, no NCCL_DEBUG, Megatron groups), their
64- and 512-rank sets. ``--shape NAME`` benchmarks one of those shapes instead.
"""

from __future__ import annotations

import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

BUS = ["18", "2a", "3a", "5d", "9a", "ab", "ba", "db"]
TAIL = ("This is most likely caused by incorrect usages of collectives, e.g., wrong sizes used "
        "across ranks, the order of collectives is not same for all ranks or the scheduled "
        "collective, for some reason, didn't run. Additionally, this can be caused by GIL "
        "deadlock or other reasons such as network errors or bugs in the communications "
        "library (e.g. NCCL), etc. ")
STUCK = (" seconds without making progress in monitoring enqueued collectives. This typically "
         "indicates a NCCL/CUDA API (e.g., CudaEventDestroy) hang blocking the watchdog, and "
         "could be triggered by another thread holding the GIL inside a CUDA api (for example, "
         "CudaEventDestroy), or other deadlock-prone behaviors.If you suspect the watchdog is "
         "not actually stuck and a longer timeout would help, you can either increase the "
         "timeout (TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC) to a larger value or disable the heartbeat "
         "monitor (TORCH_NCCL_ENABLE_MONITORING=0).")


@dataclass
class RankSpec:
    """How one rank's log ends.

    state: ``timeout`` (the watchdog fired at *seq*), ``quiet`` (alive, no timeout: it never
    issued the collective), ``dump`` (no timeout of its own, but the heartbeat monitor's dump
    line with its progress), ``stuck`` (the watchdog itself hung), ``healthy`` (no hang lines),
    ``absent`` (no log file at all).
    """

    state: str = "timeout"
    seq: int | None = None
    op: str | None = None
    completed: int | None = None
    enqueued: int | None = None
    group: tuple[int, int, str, int] | None = None  # (PG ID, PG GUID, desc, group rank)


def host_of(rank: int, per_node: int = 8, fmt: str = "gpu{:03d}") -> str:
    return fmt.format(rank // per_node + 1)


def _noise(rank: int, rng: random.Random, host: str, pid: int, step: int) -> str:
    local = rank % 8
    kind = rng.randrange(10)
    if kind < 6:
        return (f"[2025-01-20 03:{step % 60:02d}:{rng.randrange(60):02d}] step {step} | loss "
                f"{2 + rng.random():.4f} | lr 1.2e-4 | grad_norm {rng.random():.3f} | "
                f"tokens/s {400000 + rng.randrange(9000)} | mem 71.3 GiB")
    if kind == 6:
        return (f"{host}:{pid}:{pid + 171} [{local}] NCCL INFO Channel {rng.randrange(32):02d}"
                f"/0 : {rank}[{local}] -> {(rank + 1) % 1024}[{(local + 1) % 8}] via P2P/IPC/read")
    if kind == 7:
        return (f"{host}:{pid}:{pid + 171} [{local}] NCCL INFO Connected all trees, "
                f"comm 0x55f1c8a3{rank:04x}e0 nRanks 1024")
    if kind == 8:
        return ("/usr/local/lib/python3.10/dist-packages/torch/utils/checkpoint.py:464: "
                "UserWarning: torch.utils.checkpoint: the use_reentrant parameter should be "
                "passed explicitly.")
    return (f"[dataloader] rank {rank} worker {rng.randrange(8)} prefetched shard "
            f"{rng.randrange(4096):05d} ({rng.randrange(900, 1100)} samples)")


def rank_log(rank: int, world: int, spec: RankSpec, *, seq: int = 1580,
             op: str = "ALLREDUCE", style: str = "torch24", per_node: int = 8,
             host_fmt: str = "gpu{:03d}", nccl_info: bool = True, tagged: bool = True,
             noise_lines: int = 20, rng: random.Random | None = None) -> list[str]:
    """One rank's log, as PyTorch (style torch24, torch22 or torch21) and NCCL print it."""
    rng = rng or random.Random(rank)
    host, local, pid = host_of(rank, per_node, host_fmt), rank % per_node, 48230 + rank % per_node
    tag = f"[rank{rank}]:" if tagged else ""
    lines = []
    if nccl_info:
        lines += [
            f"{host}:{pid}:{pid} [{local}] NCCL INFO NCCL version 2.21.5+cuda12.4",
            f"{host}:{pid}:{pid + 160} [{local}] NCCL INFO comm 0x55f1c8a3{rank:04x}e0 rank "
            f"{rank} nranks {world} cudaDev {local} nvmlDev {local} busId {BUS[local % 8]}000 "
            "commId 0x8f2c6b1e3a5d4c70 - Init COMPLETE"]
    lines += [_noise(rank, rng, host, pid, 18000 + i) for i in range(noise_lines)]
    s = spec.seq if spec.seq is not None else seq
    o = spec.op or op
    done = spec.completed if spec.completed is not None else s - 1
    enq = spec.enqueued if spec.enqueued is not None else s
    pg_id, guid, desc, group_rank = spec.group or (0, 0, "default_pg", rank)
    if spec.state == "timeout":
        if style == "torch24":
            lines += [
                f"{tag}[E1206 18:44:12.715298746 ProcessGroupNCCL.cpp:632] [Rank {group_rank}] "
                f"Watchdog caught collective operation timeout: WorkNCCL(SeqNum={s}, OpType={o}"
                f", NumelIn=1048576, NumelOut=1048576, Timeout(ms)=600000) ran for "
                f"{600000 + rng.randrange(200)} milliseconds before timing out.",
                f"{tag}[E1206 18:44:12.715588844 ProcessGroupNCCL.cpp:2271] [PG ID {pg_id} PG "
                f"GUID {guid}({desc}) Rank {group_rank}]  failure detected by watchdog at work "
                f"sequence id: {s} PG status: last enqueued work: {enq}, last completed work: "
                f"{done}",
                f"{tag}[E1206 18:44:12.715598844 ProcessGroupNCCL.cpp:670] Stack trace of the "
                "failed collective not found, potentially because FlightRecorder is disabled. "
                "You can enable it by setting TORCH_NCCL_TRACE_BUFFER_SIZE to a non-zero value."]
        elif style == "torch22":
            lines += [
                f"{tag}[E ProcessGroupNCCL.cpp:523] [Rank {rank}] Watchdog caught collective "
                f"operation timeout: WorkNCCL(SeqNum={s}, OpType={o}, NumelIn=1048576, "
                f"NumelOut=1048576, Timeout(ms)=600000) ran for 600412 milliseconds before "
                "timing out.",
                f"{tag}[E ProcessGroupNCCL.cpp:1182] [PG 0 Rank {rank}] Exception (either an "
                f"error or timeout) detected by watchdog at work: {s}, last enqueued NCCL work: "
                f"{enq}, last completed NCCL work: {done}."]
        else:  # torch21
            lines += [
                f"{tag}[E ProcessGroupNCCL.cpp:475] [Rank {rank}] Watchdog caught collective "
                f"operation timeout: WorkNCCL(SeqNum={s}, OpType={o}, Timeout(ms)=1800000) ran "
                "for 1800566 milliseconds before timing out.",
                f"{tag}[E ProcessGroupNCCL.cpp:489] [Rank {rank}] Timeout at NCCL work: {s}, "
                f"last enqueued NCCL work: {enq}, last completed NCCL work: {done}."]
    elif spec.state == "dump":
        d = spec.completed if spec.completed is not None else s - 1
        e = spec.enqueued if spec.enqueued is not None else s - 1
        lines.append(
            f"{tag}[E1206 18:44:13.482326987 ProcessGroupNCCL.cpp:1746] [PG ID 0 PG GUID "
            f"0(default_pg) Rank {rank}] Received a dump signal due to a collective timeout "
            f"from  rank 0 and we will try our best to dump the debug info. Last enqueued NCCL "
            f"work: {e}, last completed NCCL work: {d}.{TAIL}")
    elif spec.state == "stuck":
        if style == "torch22":
            lines.append(f"{tag}[E ProcessGroupNCCL.cpp:1316] [PG 0 Rank {rank}] Heartbeat "
                         "monitor timed out! Process will be terminated after dumping debug "
                         "info. workMetaList_.size()=1")
        else:
            lines.append(f"{tag}[E1206 18:52:12.001288123 ProcessGroupNCCL.cpp:1396] [PG ID 0 "
                         f"PG GUID 0(default_pg) Rank {rank}] ProcessGroupNCCL's watchdog got "
                         f"stuck for 480{STUCK}")
    return lines


def job(world: int = 64, special: Mapping[int, RankSpec] | None = None,
        **kwargs: object) -> dict[str, str]:
    """Every rank's log file (``rankNNNN.log`` -> text); ranks not in *special* time out."""
    special = dict(special or {})
    width = max(2, len(str(world - 1)))
    files = {}
    for rank in range(world):
        spec = special.get(rank, RankSpec())
        if spec.state == "absent":
            continue
        lines = rank_log(rank, world, spec, **kwargs)  # type: ignore[arg-type]
        files[f"rank{rank:0{width}d}.log"] = "\n".join(lines) + "\n"
    return files


# --- the shapes operators collect logs in ------------------------------------------------------

SHAPES = ("kubectl", "journald", "syslog", "torchrun-tee", "torchrun-role", "srun-label",
          "mpirun", "hydra", "no-nccl-debug", "megatron")
POD = "trainjob-worker-{}"  # a Kubeflow PyTorchJob pod: NCCL prints the pod name as the host


def straggler_of(world: int) -> int:
    """The straggler the shape tests use: the sixth rank of a node in the middle of the job
    (37 of 64, 301 of 512), so its neighbours share its node."""
    return 8 * (world * 37 // 512) + 5


def _interleave(per_rank: Mapping[int, list[str]]) -> list[tuple[int, str]]:
    """Ranks' lines as one stream prints them: line i of every rank before line i + 1."""
    out: list[tuple[int, str]] = []
    depth = max((len(v) for v in per_rank.values()), default=0)
    for i in range(depth):
        out.extend((r, lines[i]) for r, lines in per_rank.items() if i < len(lines))
    return out


def megatron_specs(world: int, straggler: int, tp: int = 8) -> dict[int, RankSpec]:
    """Megatron tensor-parallel groups of *tp* consecutive ranks (PG GUID 100 + j) and
    data-parallel groups of ranks with the same tensor-parallel rank (PG GUID 200 + k). The
    straggler never issues tensor-parallel work 49387; its tensor-parallel peers time out there,
    every other rank times out in its data-parallel all-reduce 12005."""
    specs = {straggler: RankSpec("quiet")}
    for rank in range(world):
        if rank == straggler:
            continue
        if rank // tp == straggler // tp:
            specs[rank] = RankSpec(seq=49387, op="_ALLGATHER_BASE", group=(
                5, 100 + rank // tp, "TENSOR_MODEL_PARALLEL_GROUP", rank % tp))
        else:
            specs[rank] = RankSpec(seq=12005, op="ALLREDUCE", group=(
                6, 200 + rank % tp, "DATA_PARALLEL_GROUP", rank // tp))
    return specs


def shaped_job(shape: str, world: int, straggler: int | None = None,
               noise_lines: int = 4) -> tuple[dict[str, str], str]:
    """The log files of a hung *world*-rank job in one collection *shape* (SHAPES), with one
    straggler, and the host the straggler ran on. Where NCCL_DEBUG is off (syslog, torchrun,
    no-nccl-debug) the straggler prints nothing at all: only the gap in the rank numbers and
    its neighbours' node name it."""
    s = straggler_of(world) if straggler is None else straggler
    nccl = shape not in ("syslog", "torchrun-tee", "torchrun-role", "no-nccl-debug")
    host_fmt = POD if shape == "kubectl" else "gpu{:03d}"
    specs = megatron_specs(world, s) if shape == "megatron" else {s: RankSpec("quiet")}
    tagged = shape in ("kubectl", "journald", "no-nccl-debug", "megatron")
    per_rank = {r: rank_log(r, world, specs.get(r, RankSpec()), nccl_info=nccl, tagged=tagged,
                            noise_lines=noise_lines, host_fmt=host_fmt, rng=random.Random(r))
                for r in range(world)}
    if not nccl:  # the straggler's noise carries no rank: it is silent
        per_rank[s] = []
    stream = _interleave(per_rank)
    files: dict[str, list[str]] = {}
    width = len(str(world - 1))
    for i, (rank, line) in enumerate(stream):
        host, pid, local = host_of(rank, fmt=host_fmt), 48230 + rank % 8, rank % 8
        stamp = f"18:{44 + i // 600000 % 10:02d}:{i // 10000 % 60:02d}"
        if shape == "kubectl":
            name, line = f"{host}.log", f"2025-01-20T{stamp}.{i % 10**9:09d}Z {line}"
        elif shape == "journald":
            name, line = "journal.txt", f"2025-01-20T{stamp}+0000 {host} python3[{pid}]: {line}"
        elif shape == "syslog":
            name, line = "messages", f"Jan 20 {stamp} {host} python3[{pid}]: {line}"
        elif shape == "torchrun-tee":
            name, line = f"{host}.log", f"[default{local}]:{line}"
        elif shape == "torchrun-role":
            name, line = f"{host}.out", f"[trainer{local}]:{line}"
        elif shape == "srun-label":
            name, line = "slurm-4242.out", f"{rank:>{width}}: {line}"
        elif shape == "mpirun":
            name, line = "mpirun-4242.log", f"[1,{rank}]<stderr>:{line}"
        elif shape == "hydra":
            name, line = "mpiexec-4242.log", f"[{rank}] {line}"
        elif shape == "no-nccl-debug":
            name = f"{host}.log"
        else:  # megatron: one combined log
            name = "train.log"
        files.setdefault(name, []).append(line)
    return ({name: "\n".join(lines) + "\n" for name, lines in files.items()},
            host_of(s, fmt=host_fmt))


def write_job(directory: Path, files: Mapping[str, str]) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, text in files.items():
        path = directory / name
        path.write_text(text)
        paths.append(path)
    return paths


def main(argv: list[str]) -> int:
    from probes import rankfiles, ranks
    from probes.rankprogress.scan import merge_sources
    from probes.rankprogress.verdict import analyse

    shape = None
    if argv[:1] == ["--shape"] and len(argv) > 1:
        shape, argv = argv[1], argv[2:]
        if shape not in SHAPES:
            print(f"unknown shape {shape!r}; shapes: {', '.join(SHAPES)}", file=sys.stderr)
            return 2
    world = int(argv[0]) if argv else 1024
    total_mb = float(argv[1]) if len(argv) > 1 else 100.0
    straggler = world * 37 // 64 if shape is None else straggler_of(world)
    sample = random.Random(0)
    line_bytes = sum(len(_noise(r % 8, sample, "gpu001", 48230, r)) + 1
                     for r in range(2000)) / 2000
    noise = max(1, int((total_mb * 1e6 / world - 1500) / line_bytes))
    work = Path(tempfile.mkdtemp(prefix="diag-bench-ranks-"))
    try:
        start = time.monotonic()
        if shape is None:
            files = job(world, {straggler: RankSpec("quiet")}, noise_lines=noise,
                        rng=random.Random(1))
            where = host_of(straggler)
        else:
            files, where = shaped_job(shape, world, noise_lines=noise)
        paths = write_job(work, files)
        size = sum(p.stat().st_size for p in paths)
        print(f"{world} ranks, {len(paths)} files{f' ({shape})' if shape else ''}, "
              f"{size / 1e6:.1f} MB written in {time.monotonic() - start:.1f} s ({work})")

        start = time.monotonic()
        result = rankfiles.read_local([str(work / "*")])
        python_s = time.monotonic() - start
        found = [(s["rank"], s["host"]) for s in result["stragglers"]]
        print(f"python (read_local: head/tail + filter + analysis): {python_s:.2f} s -> "
              f"verdict {result['verdict']}, straggler {found}")

        start = time.monotonic()
        out = subprocess.run(["sh", "-c", ranks.command({"logs": str(work / "*")})],
                             capture_output=True, text=True, check=False).stdout
        shell_s = time.monotonic() - start
        start = time.monotonic()
        facts = ranks.parse(out)
        merged = analyse(merge_sources(("node", s) for s in facts["sources"]))
        parse_s = time.monotonic() - start
        print(f"shell (the probe's script: ls/head/tail/grep): {shell_s:.2f} s, "
              f"{len(out) / 1e6:.2f} MB sent; parse + analysis {parse_s:.2f} s -> "
              f"verdict {merged['verdict']}, straggler "
              f"{[(s['rank'], s['host']) for s in merged['stragglers']]}")
        ok = found[:1] == [(straggler, where)]
        print("straggler found" if ok else "STRAGGLER NOT FOUND")
        return 0 if ok else 1
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
