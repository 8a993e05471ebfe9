"""Benchmark: peak memory of reading rank logs and host outputs, each case in its own process.

Not a test: run it by hand to see what reading costs at scale::

    .venv/bin/python bench/rankmem.py             # every case
    .venv/bin/python bench/rankmem.py fleet-64    # one case

Cases (peak RSS of a fresh interpreter that imports diag, minus nothing: the figure is what
the operator's machine needs):

- ``baseline``: the interpreter and diag's imports, reading nothing;
- ``local-1024``: ``probes.rankfiles.read_local`` over 1,024 rank logs, 100 MB in all;
- ``cli-1024``: ``diag parse rank-logs`` over the same 1,024 files;
- ``local-big``: one combined 100 MB log of all 1,024 ranks, interleaved as a launcher writes
  it (the head/tail path);
- ``fleet-N``: the ranks probe's output for 1,024 shared files parsed once per host for N hosts
  (every node of a fleet reads the same shared directory), facts kept as a walk keeps them;
- ``binary``: ``diag parse rank-logs`` over the 1,024 files plus a 64 MB binary file;
- ``parse-huge``: ``diag parse nvidia-smi`` on a 1 GB file (refused after a bounded read).
"""

from __future__ import annotations

import contextlib
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

CASES = ("baseline", "local-1024", "cli-1024", "local-big", "fleet-1", "fleet-64",
         "fleet-256", "binary", "parse-huge")


def prepare(work: Path) -> None:
    """Every input, written once by the parent (so no case pays for generating it): 1,024 rank
    logs of ~100 KB (bench/ranks.py's generator), their concatenation, a 64 MB binary file
    and a sparse 1 GB file."""
    import random

    from bench import ranks as gen

    logs = work / "logs"
    files = gen.job(1024, {592: gen.RankSpec("quiet")}, noise_lines=700, rng=random.Random(1))
    gen.write_job(logs, files)
    (work / "big").mkdir()
    # one launcher's combined log: every rank's init lines first, its hang lines last
    streams = {int(name[4:8]): body.splitlines() for name, body in files.items()}
    del files
    with (work / "big" / "combined.log").open("w") as out:
        for _, line in gen._interleave(streams):
            out.write(line + "\n")
    del streams
    (work / "core.12345").write_bytes(os.urandom(64 << 20))
    with (work / "huge.txt").open("wb") as out:
        out.truncate(1 << 30)  # sparse: 1 GB of NULs without the disk


def run_case(case: str, work: Path) -> None:
    """Run one case in this process (the parent measures it)."""
    from assistant.cli import main as cli
    from probes import rankfiles, ranks

    logs = work / "logs"
    paths = sorted(str(p) for p in logs.glob("rank*.log"))
    if case == "local-1024":
        r = rankfiles.read_local([str(logs / "rank*.log")])
        assert r["stragglers"][0]["rank"] == 592, r["verdict"]
    elif case == "cli-1024":
        with open(os.devnull, "w") as sink, contextlib.redirect_stdout(sink):
            assert cli(["parse", "rank-logs", *paths]) == 0
    elif case == "local-big":
        r = rankfiles.read_local([str(work / "big" / "combined.log")])
        assert r["ranks_seen"] >= 1000, r["ranks_seen"]
    elif case.startswith("fleet-"):
        from probes.base import get_probe
        from tests.probes.probe_outputs import context

        hosts = int(case.split("-")[1])
        out = subprocess.run(["sh", "-c", ranks.command({"logs": str(logs / "rank*.log")})],
                             capture_output=True, text=True, check=True).stdout
        probe = get_probe("ranks")
        kept = {f"gpu{i:03d}": probe.parse(out) for i in range(hosts)}  # as a walk keeps them
        found = probe.check_fleet(kept, context(params={"peers": list(kept)}))
        assert found and found[0].code == "straggler-rank"
    elif case == "binary":
        with open(os.devnull, "w") as sink, contextlib.redirect_stdout(sink):
            assert cli(["parse", "rank-logs", str(work / "core.12345"), *paths]) == 0
    elif case == "parse-huge":
        assert cli(["parse", "nvidia-smi", str(work / "huge.txt")]) == 2


def measure(case: str, work: Path) -> tuple[float, float]:
    """(peak RSS in MB, seconds) of *case* run in a child interpreter."""
    start = time.monotonic()
    proc = subprocess.run([sys.executable, __file__, "--child", case, str(work)],
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{case}: {proc.stderr.strip()[-500:]}")
    return float(proc.stdout.strip().splitlines()[-1]), time.monotonic() - start


def main(argv: list[str]) -> int:
    if argv[:1] == ["--child"]:
        run_case(argv[1], Path(argv[2]))
        print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
        return 0
    if argv[:1] == ["--prepare"]:
        prepare(Path(argv[1]))
        return 0
    cases = argv or list(CASES)
    with tempfile.TemporaryDirectory(prefix="diag-bench-mem-") as tmp:
        work = Path(tmp)
        # in a child: a child's peak RSS starts from its parent's size at fork, so this
        # process stays small
        subprocess.run([sys.executable, __file__, "--prepare", tmp], check=True)
        for case in cases:
            rss, secs = measure(case, work)
            print(f"{case:12s} peak RSS {rss:7.1f} MB   {secs:5.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
