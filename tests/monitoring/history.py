"""A deterministic incident history as OpenMetrics text, for ``promtool tsdb
create-blocks-from openmetrics``: two hours at 15 s from T0, one host per metric signature with
that signature's fault planted at its own time, the healthy twin ``twin01`` (utilization 98 %,
power at its 700 W cap with the SW power-cap clock reason, steady counters, and every counter
reset to 0 by a reboot halfway through), ``calm01`` healthy, and ``dark01`` in no series at all.
Metric names and labels as dcgm-exporter (``Hostname``, ``gpu``) and node_exporter
(``instance`` with its port) publish them."""

from __future__ import annotations

from collections.abc import Callable, Iterator

T0 = 1_767_225_600  # 2026-01-01T00:00:00Z
STEP = 15
POINTS = 2 * 3600 // STEP + 1
END = T0 + (POINTS - 1) * STEP
REBOOT = T0 + 1800  # the twin's counters fall to 0 here

# metric -> (exporter, healthy gauge value or counter increment per step, twin value/increment)
Gauge = tuple[str, float, float]
GAUGES: dict[str, Gauge] = {
    "DCGM_FI_DEV_GPU_UTIL": ("dcgm", 97, 98), "DCGM_FI_PROF_GR_ENGINE_ACTIVE": ("dcgm", 0.9, 0.92),
    "DCGM_FI_DEV_XID_ERRORS": ("dcgm", 0, 13), "DCGM_FI_DEV_SM_CLOCK": ("dcgm", 1980, 1755),
    "DCGM_FI_DEV_GPU_TEMP": ("dcgm", 65, 74), "DCGM_FI_DEV_CLOCKS_EVENT_REASONS": ("dcgm", 0, 4),
    "DCGM_FI_DEV_POWER_USAGE": ("dcgm", 650, 700), "DCGM_FI_DEV_ROW_REMAP_FAILURE": ("dcgm", 0, 0),
    "DCGM_FI_DEV_FB_USED": ("dcgm", 40000, 72000), "DCGM_FI_DEV_FB_FREE": ("dcgm", 40000, 9000),
    "node_filesystem_avail_bytes": ("node", 5e11, 4e11),
    "node_filesystem_size_bytes": ("node", 1e12, 1e12), "node_uname_info": ("node", 1, 1),
}
COUNTERS: dict[str, Gauge] = {
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": ("dcgm", 0, 0),
    "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS": ("dcgm", 0, 0),
    "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL": ("dcgm", 0, 0),
    "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL": ("dcgm", 0, 0),
    "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL": ("dcgm", 0, 0),
    "DCGM_FI_DEV_PCIE_REPLAY_COUNTER": ("dcgm", 0, 0),
    "node_infiniband_link_downed_total": ("node", 0, 0),
    "node_infiniband_symbol_error_total": ("node", 0, 0),
    "node_infiniband_port_errors_received_total": ("node", 0, 0),
    "node_network_receive_drop_total": ("node", 0.5, 0.5),
    "node_network_transmit_drop_total": ("node", 0, 0),
    "node_network_receive_errs_total": ("node", 0, 0),
    "node_network_transmit_errs_total": ("node", 0, 0),
    "node_netstat_Tcp_RetransSegs": ("node", 15, 15),
    "node_netstat_Tcp_OutSegs": ("node", 150_000, 150_000),
    "node_disk_read_time_seconds_total": ("node", 0.3, 0.3),
    "node_disk_write_time_seconds_total": ("node", 0.3, 0.3),
    "node_disk_reads_completed_total": ("node", 1500, 1500),
    "node_disk_writes_completed_total": ("node", 1500, 1500),
    "node_pressure_io_stalled_seconds_total": ("node", 0.05, 0.05),
    "node_pressure_cpu_waiting_seconds_total": ("node", 0.3, 0.3),
    "node_pressure_io_waiting_seconds_total": ("node", 0.05, 0.05),
}
BASE = 1_000_000.0  # every counter's value at T0: years of history before the window

# signature id -> (metric -> value or increment per step once the fault starts)
PLANTS: dict[str, dict[str, float]] = {
    "metric-gpu-util-low": {"DCGM_FI_DEV_GPU_UTIL": 3},
    "metric-gr-engine-idle": {"DCGM_FI_PROF_GR_ENGINE_ACTIVE": 0.02},
    "metric-xid-new": {"DCGM_FI_DEV_XID_ERRORS": 79},
    "metric-sm-clock-low-under-load": {"DCGM_FI_DEV_SM_CLOCK": 795},
    "metric-gpu-hot": {"DCGM_FI_DEV_GPU_TEMP": 92},
    "metric-clock-hw-slowdown": {"DCGM_FI_DEV_CLOCKS_EVENT_REASONS": 132},
    "metric-power-draw-collapse": {"DCGM_FI_DEV_POWER_USAGE": 62},
    "metric-ecc-dbe": {"DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": 1},
    "metric-row-remap-failure": {"DCGM_FI_DEV_ROW_REMAP_FAILURE": 1},
    "metric-uncorrectable-remapped-rows": {"DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS": 1},
    "metric-nvlink-crc-rate": {"DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL": 3000},
    "metric-nvlink-replay": {"DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL": 1},
    "metric-nvlink-recovery": {"DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL": 1},
    "metric-pcie-replay-rate": {"DCGM_FI_DEV_PCIE_REPLAY_COUNTER": 5},
    "metric-fb-full": {"DCGM_FI_DEV_FB_USED": 80000, "DCGM_FI_DEV_FB_FREE": 100},
    "metric-ib-link-downed": {"node_infiniband_link_downed_total": 1},
    "metric-ib-symbol-errors": {"node_infiniband_symbol_error_total": 5},
    "metric-ib-rcv-errors": {"node_infiniband_port_errors_received_total": 1},
    "metric-net-drops": {"node_network_receive_drop_total": 3000},
    "metric-net-errors": {"node_network_receive_errs_total": 60},
    "metric-tcp-retrans": {"node_netstat_Tcp_RetransSegs": 3000},
    "metric-disk-latency": {"node_disk_read_time_seconds_total": 300},
    "metric-io-pressure": {"node_pressure_io_stalled_seconds_total": 6},
    "metric-cpu-pressure": {"node_pressure_cpu_waiting_seconds_total": 12},
    "metric-filesystem-full": {"node_filesystem_avail_bytes": 1e10},
}
PLANTED = {sig: f"p{i:02d}" for i, sig in enumerate(sorted(PLANTS), 1)}
TWIN, CALM, DARK, WAVE = "twin01", "calm01", "dark01", "wave01"
GONE, GONE_AT = "gone01", T0 + 5400  # its exporters stop answering at 01:30
WIDE = 100_000  # series of one metric at END: an answer no client should take whole
# wave01: utilization 95 % for a minute, 20 % the next (a 120 s period) from the fault hour
# on, its I/O wait rising in the low phases (a data loader starving the GPUs)
WAVE_PERIOD = 120


def _wave_low(t: int) -> bool:
    return t >= T0 + 3600 and ((t - T0) // (WAVE_PERIOD // 2)) % 2 == 1


def fault_start(sig: str) -> int:
    """When signature *sig*'s fault starts on its host: an hour in, 30 s apart."""
    return T0 + 3600 + 30 * sorted(PLANTS).index(sig)


def _labels(metric: str, exporter: str, host: str) -> str:
    if exporter == "dcgm":
        return (f'gpu="0",UUID="GPU-{host}-0",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",'
                f'Hostname="{host}",instance="{host}:9400",job="dcgm"')
    extra = {"node_infiniband": 'device="mlx5_0",port="1",', "node_network": 'device="ib0",',
             "node_disk": 'device="nvme0n1",', "node_filesystem": 'mountpoint="/",'}
    prefix = next((v for k, v in extra.items() if metric.startswith(k)), "")
    return f'{prefix}instance="{host}:9100",job="node"'


def _series(host: str) -> Iterator[tuple[str, str, Callable[[int], float]]]:
    plant = next(({m: (v, fault_start(s)) for m, v in PLANTS[s].items()}
                  for s, h in PLANTED.items() if h == host), {})
    for metric, (exp, healthy, twin) in GAUGES.items():
        base = twin if host == TWIN else healthy
        bad = plant.get(metric)
        if host == WAVE and metric == "DCGM_FI_DEV_GPU_UTIL":
            yield metric, exp, (lambda t: 20 if _wave_low(t) else 95)
            continue
        yield metric, exp, (lambda t, b=base, p=bad: p[0] if p and t >= p[1] else b)
    for metric, (exp, healthy, twin) in COUNTERS.items():
        inc = twin if host == TWIN else healthy
        bad = plant.get(metric)

        def value(t: int, i: float = inc, p: tuple[float, int] | None = bad,
                  m: str = metric) -> float:
            if host == TWIN:  # steady, then a reboot sets it to 0 and it stays steady
                return BASE + i * (t - T0) / STEP if t < REBOOT else i * (t - REBOOT) / STEP
            total = BASE + i * (t - T0) / STEP
            if host == WAVE and m == "node_pressure_io_waiting_seconds_total":
                total = BASE + sum(0.9 if _wave_low(x) else 0.01
                                   for x in range(T0, t + 1, STEP))
            if p and t >= p[1]:
                total += p[0] * ((t - p[1]) // STEP + 1)
            return total
        yield metric, exp, value


def hosts() -> list[str]:
    return [*PLANTED.values(), TWIN, CALM, WAVE]


def openmetrics() -> str:
    by_metric: dict[str, list[str]] = {}
    for host in [*hosts(), GONE]:
        last = GONE_AT if host == GONE else END
        for metric, exp, value in _series(host):
            labels = _labels(metric, exp, host)
            by_metric.setdefault(metric, []).extend(
                f"{metric}{{{labels}}} {value(t):.12g} {t}"
                for t in range(T0, last + 1, STEP))
    by_metric["diag_test_wide"] = [f'diag_test_wide{{i="{i}"}} 1 {END}' for i in range(WIDE)]
    lines: list[str] = []
    for metric, samples in by_metric.items():
        lines.append(f"# TYPE {metric} gauge")
        lines.extend(samples)
    lines.append("# EOF")
    return "\n".join(lines) + "\n"
