"""The monitoring step over 512 hosts x 8 GPUs x 6 h at 15 s (issue 26): a real Prometheus over
a TSDB built with promtool from generated OpenMetrics (four dcgm-exporter metrics per GPU:
temperature, utilization, last XID, NVLink CRC counter; node_uname_info per host), one host
with an XID and a CRC storm planted, one whose utilization swings. Measures the step's wall
time (target < 3 s) and the client's peak Python memory (tracemalloc) and RSS growth.

    .venv/bin/python bench/monitoring.py [--hosts 512] [--gpus 8] [--hours 6]
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from assistant.monitoring.config import PromConfig
from assistant.monitoring.step import MonitoringStep
from tests.monitoring import promserver

T0, STEP = 1_767_225_600, 15


def write_openmetrics(path: Path, hosts: int, gpus: int, points: int) -> int:
    end = T0 + (points - 1) * STEP
    bad, wave = "gpu0007", "gpu0011"
    samples = 0
    with path.open("w") as out:
        for metric in ("DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_XID_ERRORS",
                       "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL"):
            out.write(f"# TYPE {metric} gauge\n")
            for h in range(1, hosts + 1):
                host = f"gpu{h:04d}"
                for g in range(gpus):
                    labels = f'{metric}{{gpu="{g}",Hostname="{host}"}}'
                    lines = []
                    for i in range(points):
                        t = T0 + i * STEP
                        late = i > points * 3 // 4
                        if metric == "DCGM_FI_DEV_GPU_TEMP":
                            v: float = 66
                        elif metric == "DCGM_FI_DEV_GPU_UTIL":
                            v = 20 if host == wave and (i // 4) % 2 else 97
                        elif metric == "DCGM_FI_DEV_XID_ERRORS":
                            v = 79 if host == bad and g == 3 and late else 0
                        else:
                            v = 1000 + (i * 3000 if host == bad and late else 0)
                        lines.append(f"{labels} {v} {t}\n")
                    out.writelines(lines)
                    samples += points
        out.write("# TYPE node_uname_info gauge\n")
        for h in range(1, hosts + 1):
            out.writelines(f'node_uname_info{{instance="gpu{h:04d}:9100"}} 1 {T0 + i * STEP}\n'
                           for i in range(points))
        out.write("# EOF\n")
    print(f"history: {samples:,} GPU samples up to {end}", file=sys.stderr)
    return end


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--hosts", type=int, default=512)
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--hours", type=float, default=6)
    args = parser.parse_args()
    points = int(args.hours * 3600 / STEP) + 1
    server = promserver.PromServer("")
    began = time.monotonic()
    end = write_openmetrics(server.dir / "src.om", args.hosts, args.gpus, points)
    server.openmetrics = (server.dir / "src.om").read_text()
    (server.dir / "src.om").unlink()
    print(f"generated in {time.monotonic() - began:.1f} s", file=sys.stderr)
    began = time.monotonic()
    server.start(timeout=300)
    server.openmetrics = ""
    print(f"TSDB built and Prometheus up in {time.monotonic() - began:.1f} s", file=sys.stderr)
    try:
        pw = server.dir / "pw"
        pw.write_text(promserver.PASSWORD)
        config = PromConfig(url=server.url, username=promserver.USER, password_file=str(pw),
                            timeout=60)
        hosts = [f"gpu{h:04d}" for h in range(1, args.hosts + 1)]
        step = MonitoringStep(config, start=T0, end=end)
        for run in ("cold", "warm"):
            rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            tracemalloc.start()
            began = time.monotonic()
            outcome = step.run(hosts, lambda line: print(line, file=sys.stderr))
            took = time.monotonic() - began
            _, peak = tracemalloc.get_traced_memory()
            tracemalloc.stop()
            grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss
            codes = sorted({f.code for f in outcome.findings})
            print(f"{run}: {args.hosts} hosts x {args.gpus} GPUs x {args.hours:g} h at {STEP} s: "
                  f"step {took:.2f} s, Python peak {peak / 2**20:.1f} MiB, max RSS grew "
                  f"{grown / 1024:.1f} MiB; findings {codes}")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
