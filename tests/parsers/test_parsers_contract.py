"""Every real sample parses with its KIND and carries the contract keys with the right types.

The contract (docs/parse-contract.md) is written down once, as data, in ``CONTRACT``; the checker
walks it against each parser result. Kinds without a public sample are covered by minimal
hand-written inputs in ``NO_SAMPLE_INPUTS`` (fuller cases live in test_parsers_handwritten.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from probes.parsers import KINDS, ParseError, module_name, parse

REAL = Path(__file__).resolve().parents[2] / "fixtures" / "real"
SAMPLES = sorted(REAL.glob("*__*.txt"))


@dataclass(frozen=True)
class Scalar:
    """A leaf: one of ``types`` (bool never counts as int), or None when ``nullable``."""

    types: tuple[type, ...]
    nullable: bool = False

    def __or__(self, other: None) -> Scalar:
        return Scalar(self.types, True)


@dataclass(frozen=True)
class ListOf:
    item: Any


@dataclass(frozen=True)
class MapOf:
    """A dict with arbitrary string keys whose values all match ``value``."""

    value: Any


@dataclass(frozen=True)
class Optional:
    """An object spec (a dict of keys) that may also be null."""

    item: Any


INT = Scalar((int,))
NUM = Scalar((int, float))
STR = Scalar((str,))
BOOL = Scalar((bool,))
SCALAR = Scalar((str, int, float))
RANK = Scalar((int, str))

CONTRACT: dict[str, dict[str, Any]] = {
    "nvidia-smi-topo": {
        "gpus": ListOf(STR),
        "nics": MapOf(STR | None),
        "links": MapOf(MapOf(STR)),
        "cpu_affinity": MapOf(STR | None),
        "numa_affinity": MapOf(STR | None),
    },
    "nvidia-smi": {
        "driver_version": STR | None,
        "cuda_version": STR | None,
        "gpus": ListOf(
            {
                "index": INT,
                "name": STR | None,
                "memory_used_mib": INT | None,
                "memory_total_mib": INT | None,
                "utilization_pct": INT | None,
                "temperature_c": INT | None,
            }
        ),
    },
    "nvidia-smi-q": {
        "driver_version": STR | None,
        "cuda_version": STR | None,
        "gpus": ListOf(
            {"name": STR | None, "bus_id": STR | None, "remapped_rows_pending": BOOL | None,
             "pcie_gen_max": INT | None, "pcie_gen_current": INT | None,
             "pcie_gen_device_max": INT | None, "pcie_gen_host_max": INT | None,
             "pcie_width_max": INT | None, "pcie_width_current": INT | None,
             "pcie_replays": INT | None, "pcie_replay_rollovers": INT | None}
        ),
    },
    "nvidia-smi-query": {"rows": ListOf(MapOf(SCALAR | None))},
    "nvidia-smi-nvlink": {
        "gpus": ListOf(
            {
                "index": INT | None,
                "links": ListOf({"link": INT, "speed_gb_s": NUM | None, "active": BOOL | None}),
            }
        )
    },
    "ibstat": {
        "cas": ListOf(
            {
                "name": STR,
                "ports": ListOf(
                    {
                        "port": INT,
                        "state": STR | None,
                        "physical_state": STR | None,
                        "rate_gbit_s": NUM | None,
                        "link_layer": STR | None,
                        "base_lid": INT | None,
                        "sm_lid": INT | None,
                    }
                ),
            }
        ),
        "errors": ListOf(STR),
    },
    "ibv_devinfo": {
        "devices": ListOf(
            {
                "name": STR,
                "ports": ListOf({"port": INT, "state": STR | None, "link_layer": STR | None}),
            }
        )
    },
    "ibdev2netdev": {
        "mappings": ListOf({"device": STR, "port": INT, "netdev": STR, "up": BOOL | None})
    },
    "ethtool-S": {"counters": MapOf(INT)},
    "ib-sysfs-counters": {"counters": MapOf(INT)},
    "perfquery": {"counters": MapOf(INT)},
    "rdma-statistic": {"ports": ListOf({"link": STR, "counters": MapOf(INT)})},
    "nccl-tests": {
        "rows": ListOf(
            {"size_bytes": INT, "busbw_oop_gb_s": NUM | None, "busbw_ip_gb_s": NUM | None,
             "wrong_oop": INT | None, "wrong_ip": INT | None}
        ),
        "avg_busbw_gb_s": NUM | None,
        "ranks": INT | None,
        "wrong": INT | None,
        "out_of_bounds": INT | None,
        "completed": BOOL,
        "test_failures": ListOf(STR),
        "nccl_warns": ListOf(STR),
    },
    "nccl-debug": {
        "nccl_version": STR | None,
        "networks": ListOf(STR),
        "watchdog_timeouts": ListOf(
            {"op": STR | None, "seq": INT | None, "timeout_ms": INT | None}
        ),
    },
    "dmesg-xid": {
        "xids": ListOf({"pci": STR, "code": INT, "text": STR | None}),
        "fallen_off_bus": BOOL,
    },
    "dmesg-link": {
        "events": ListOf({"timestamp": STR | None, "uptime_s": NUM | None, "driver": STR,
                          "pci": STR | None, "ifname": STR | None, "port": INT | None,
                          "state": STR, "source": STR}),
        "module_events": ListOf({"pci": STR | None, "module": INT, "event": STR}),
        "flaps": MapOf(INT),
    },
    "ib-hw-counters": {
        "ports": ListOf({"device": STR | None, "port": INT | None, "counters": MapOf(INT)}),
    },
    "cuda-oom": {
        "tried_to_allocate_bytes": INT | None,
        "total_capacity_bytes": INT | None,
        "free_bytes": INT | None,
        "gpu": INT | None,
    },
    "fio-json": {
        "jobs": ListOf(
            {
                "name": STR | None,
                "read_iops": NUM | None,
                "write_iops": NUM | None,
                "read_clat_p99_us": NUM | None,
                "write_clat_p99_us": NUM | None,
            }
        )
    },
    "ioping": {"requests": INT | None, "avg_us": NUM | None, "max_us": NUM | None},
    "dd": {"bytes": INT | None, "seconds": NUM | None, "bytes_per_s": NUM | None},
    "netstat-s": {"tcp_retransmitted_segments": INT | None},
    "nstat": {"tcp_retransmitted_segments": INT | None},
    "uname-r": {"kernel": STR},
    "proc-driver-nvidia-version": {"driver_version": STR, "open_kernel_module": BOOL},
    "nvcc-version": {"cuda_version": STR | None},
    "ofed-info": {"ofed_version": STR},
    "dcgmi-diag": {
        "format": STR,
        "level": INT | None,
        "dcgm_version": STR | None,
        "driver_version": STR | None,
        "device_ids": ListOf(STR),
        "tests": ListOf({"name": STR, "category": STR | None, "status": STR,
                         "gpus": MapOf(STR), "messages": ListOf(STR),
                         "codes": ListOf({"gpu": STR | None, "code": INT | None,
                                          "severity": INT | None})}),
        "failed_tests": ListOf(STR),
        "gpu_ids": ListOf(INT),
        "errors": ListOf(STR),
        "run_error": STR | None,
    },
    "ib-write-bw": {
        "test": STR | None, "device": STR | None, "link_type": STR | None, "qps": INT | None,
        "connection_type": STR | None, "mtu_bytes": INT | None, "use_cuda": BOOL,
        "report_unit": STR | None,
        "rows": ListOf({"size_bytes": INT, "iterations": INT | None,
                        "bw_peak_gbit_s": NUM | None, "bw_avg_gbit_s": NUM | None,
                        "msg_rate_mpps": NUM | None}),
        "warnings": ListOf(STR),
    },
    "ib-write-lat": {
        "test": STR | None, "device": STR | None, "link_type": STR | None,
        "rows": ListOf({"size_bytes": INT, "iterations": INT | None,
                        "t_min_us": NUM | None, "t_max_us": NUM | None,
                        "t_typical_us": NUM | None, "t_avg_us": NUM | None,
                        "t_stdev_us": NUM | None, "p99_us": NUM | None, "p999_us": NUM | None}),
        "warnings": ListOf(STR),
    },
    "nvbandwidth": {
        "version": STR | None,
        "driver_version": STR | None,
        "tests": ListOf({"name": STR, "unit": STR | None,
                         "matrices": ListOf({"label": STR | None,
                                             "cells": MapOf(MapOf(NUM | None))})}),
        "sums_gb_s": MapOf(NUM),
        "sums_ns": MapOf(NUM),
    },
    "gpu-burn": {
        "duration_s": INT | None,
        "gpu_names": MapOf(STR),
        "gpus_tested": INT | None,
        "verdicts": MapOf(STR),
        "faulty": ListOf(INT),
        "last_progress": Optional({"percent": NUM | None, "gflops": ListOf(NUM),
                                   "errors": ListOf(INT), "temps_c": ListOf(INT | None)}),
        "warning": BOOL,
        "died": BOOL,
    },
    # not in docs/parse-contract.md: diag's own kind for PyTorch ProcessGroupNCCL rank progress
    "rank-logs": {
        "ranks_seen": INT, "world_size": INT | None,
        "max_last_completed_seq": INT | None, "min_last_completed_seq": INT | None,
        "timed_out_ranks": INT, "verdict": STR, "summary": STR, "stragglers_total": INT,
        "stragglers": ListOf({"rank": INT | None, "host": STR | None, "pg": STR,
                              "last_completed": INT | None, "reason": STR}),
        "mismatches": ListOf({"pg": STR, "seq": INT, "ops": MapOf(ListOf(RANK)),
                              "counts": MapOf(INT)}),
        "stuck": ListOf({"rank": INT | None, "host": STR | None}),
        "missing_ranks": ListOf(INT),
        "table": ListOf({"rank": RANK, "pg": STR, "host": STR | None, "state": STR,
                         "seq": INT | None, "op": STR | None, "last_completed": INT | None}),
        "files_read": INT,
    },
    # diag's own kinds for Slurm (samples recorded from the real test cluster, SOURCES.md)
    "sinfo": {
        "nodes": ListOf({"node": STR, "partitions": ListOf(STR), "state": STR | None,
                         "base_state": STR | None, "drain": BOOL, "down": BOOL, "usable": BOOL,
                         "gpus_total": INT | None, "gpus_used": INT | None,
                         "gpus_free": INT | None, "reason": STR | None}),
        "partitions": MapOf(ListOf(STR)),
        "default_partition": STR | None,
    },
    "squeue": {
        "jobs": ListOf({"job_id": STR, "partition": STR | None, "user": STR | None,
                        "state": STR | None, "nodes": INT | None, "gpus": INT,
                        "gpus_per_node": INT | None, "gpus_per_job": INT | None,
                        "reason": STR | None, "reason_kind": STR | None}),
        "pending": INT,
    },
    "scontrol-job": {
        "jobs": ListOf({"job_id": STR, "state": STR, "ended": BOOL, "partition": STR | None,
                        "nodelist": STR | None, "num_nodes": INT | None,
                        "start_time": STR | None, "gres": STR | None}),
    },
    # the evidence sweep's components
    "systemctl-show": {"units": ListOf(MapOf(STR)), "error": STR | None},
    "nvidia-smi-fabric": {
        "gpus": ListOf({"bus_id": STR | None, "state": STR | None, "status": STR | None,
                        "clique_id": INT | None, "cluster_uuid": STR | None,
                        "health_summary": STR | None, "health_bandwidth": STR | None}),
        "gpu_lines": INT,
    },
    "nvidia-smi-L": {
        "gpus": ListOf({"index": INT, "name": STR | None, "uuid": STR, "mig_devices": INT}),
        "error": STR | None, "error_kind": STR | None, "errors": ListOf(STR),
        "lost_bus_ids": ListOf(STR), "nvml_library_version": STR | None,
    },
    "ldconfig-p": {
        "libs": ListOf({"name": STR, "abi": STR | None, "path": STR, "version": STR | None}),
        "cache_count": INT | None,
    },
    "mlnx-qos": {"dcbx_mode": STR | None, "trust": STR | None,
                 "dscp2prio": MapOf(ListOf(INT)), "buffer_sizes": Optional(ListOf(INT)),
                 "max_buffer_size": INT | None, "cable_len": INT | None,
                 "pfc_enabled": ListOf(INT), "pfc_buffer": Optional(ListOf(INT)),
                 "tcs": ListOf({"tc": INT, "ratelimit": STR, "tsa": STR, "bw_pct": INT | None,
                                "priorities": ListOf(INT)}),
                 "warnings": ListOf(STR)},
    "show-gids": {"gids": ListOf({"device": STR, "port": INT, "index": INT, "gid": STR,
                                  "ipv4": STR | None, "version": STR | None,
                                  "netdev": STR | None}),
                  "count": INT | None},
    "ethtool-a": {"ifname": STR | None, "autoneg": BOOL | None, "rx": BOOL | None,
                  "tx": BOOL | None, "rx_negotiated": BOOL | None, "tx_negotiated": BOOL | None,
                  "stats": MapOf(INT), "error": STR | None},
    "dcb": {"pfc_enabled": Optional(ListOf(INT)), "pfc_cap": INT | None, "pfc_delay": INT | None,
            "app": MapOf(ListOf(STR)), "trust": STR | None, "errors": ListOf(STR)},
    "kernel-log": {"lines": ListOf({"uptime_s": NUM | None, "timestamp": STR | None,
                                    "text": STR}), "stamped": INT},
    "proc-limits": {"limits": MapOf({"soft": INT | None, "hard": INT | None,
                                     "soft_unlimited": BOOL, "hard_unlimited": BOOL,
                                     "units": STR | None})},
    "proc-mountinfo": {"mounts": ListOf({"mount_id": INT, "parent_id": INT, "dev": STR,
                                         "root": STR, "mountpoint": STR, "options": STR,
                                         "optional": ListOf(STR), "fstype": STR, "source": STR,
                                         "super_options": STR, "readonly": BOOL})},
    "proc-pressure": {"some": {"avg10": NUM, "avg60": NUM, "avg300": NUM, "total_us": INT},
                      "full": Optional({"avg10": NUM, "avg60": NUM, "avg300": NUM,
                                        "total_us": INT})},
}

# Minimal real-format inputs for the kinds that have no public sample.
NO_SAMPLE_INPUTS: dict[str, str] = {
    # torch 2.x watchdog lines of two ranks timing out in the same all_reduce
    "rank-logs": (
        "[rank0]:[E1206 18:44:12.715298746 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught "
        "collective operation timeout: WorkNCCL(SeqNum=1580, OpType=ALLREDUCE, NumelIn=1, "
        "NumelOut=1, Timeout(ms)=600000) ran for 600061 milliseconds before timing out.\n"
        "[rank0]:[E1206 18:44:12.715588844 ProcessGroupNCCL.cpp:1664] [PG 0 (default_pg) Rank 0]"
        " Exception (either an error or timeout) detected by watchdog at work: 1580, last "
        "enqueued NCCL work: 1580, last completed NCCL work: 1579.\n"
        "[rank2]:[E1206 18:44:12.755262105 ProcessGroupNCCL.cpp:607] [Rank 2] Watchdog caught "
        "collective operation timeout: WorkNCCL(SeqNum=1580, OpType=ALLREDUCE, NumelIn=1, "
        "NumelOut=1, Timeout(ms)=600000) ran for 600099 milliseconds before timing out.\n"
    ),
    "rdma-statistic": (
        "link mlx5_0/1 rx_write_requests 0 rx_read_requests 0 out_of_buffer 12 "
        "local_ack_timeout_err 3 np_cnp_sent 7\n"
        "link mlx5_1/1 rx_write_requests 0 rx_read_requests 0 out_of_buffer 0\n"
    ),
    "uname-r": "5.15.0-91-generic\n",
    "ofed-info": "MLNX_OFED_LINUX-5.8-1.0.1.1:\n",
}


def _is(value: Any, scalar: Scalar) -> bool:
    if value is None:
        return scalar.nullable
    if isinstance(value, bool):
        return bool in scalar.types
    return isinstance(value, scalar.types)


def contract_errors(value: Any, spec: Any, where: str = "$") -> list[str]:
    """Every place where ``value`` does not match ``spec``, as readable paths."""
    if isinstance(spec, Scalar):
        ok = _is(value, spec)
        return [] if ok else [f"{where}: {value!r} is not {spec}"]
    if isinstance(spec, Optional):
        return [] if value is None else contract_errors(value, spec.item, where)
    if isinstance(spec, ListOf):
        if not isinstance(value, list):
            return [f"{where}: expected a list, got {type(value).__name__}"]
        return [
            e for i, v in enumerate(value) for e in contract_errors(v, spec.item, f"{where}[{i}]")
        ]
    if isinstance(spec, MapOf):
        if not isinstance(value, dict):
            return [f"{where}: expected an object, got {type(value).__name__}"]
        errors = [f"{where}: key {k!r} is not a string" for k in value if not isinstance(k, str)]
        return errors + [
            e for k, v in value.items() for e in contract_errors(v, spec.value, f"{where}.{k}")
        ]
    assert isinstance(spec, dict)
    if not isinstance(value, dict):
        return [f"{where}: expected an object, got {type(value).__name__}"]
    errors = [f"{where}: missing key {key!r}" for key in spec if key not in value]
    return errors + [
        e
        for key, sub in spec.items()
        if key in value
        for e in contract_errors(value[key], sub, f"{where}.{key}")
    ]


def _kind(path: Path) -> str:
    return path.name.split("__", 1)[0]


def test_contract_lists_every_kind() -> None:
    # the contract table here and the dispatcher's KINDS name the same kinds
    assert set(CONTRACT) == set(KINDS)


def test_every_kind_has_a_module_with_parse() -> None:
    # each KIND maps to probes/parsers/<kind with - as _>.py defining parse()
    package = Path(__file__).resolve().parents[2] / "probes" / "parsers"
    for kind in KINDS:
        assert (package / f"{module_name(kind)}.py").is_file(), kind


def test_every_sample_names_a_known_kind() -> None:
    # a fixture whose prefix is not a KIND would silently never be tested
    assert SAMPLES, f"no samples found in {REAL}"
    assert {_kind(p) for p in SAMPLES} <= set(KINDS)


def test_every_kind_has_a_sample_or_a_handwritten_input() -> None:
    # kinds without public output are still exercised against the contract
    covered = {_kind(p) for p in SAMPLES} | set(NO_SAMPLE_INPUTS)
    assert covered == set(KINDS)


@pytest.mark.parametrize("path", SAMPLES, ids=[p.name for p in SAMPLES])
def test_real_sample_meets_contract(path: Path) -> None:
    # the sample parses with its own KIND; every contract key is present with the right type
    result = parse(_kind(path), path.read_text(encoding="utf-8"))
    assert contract_errors(result, CONTRACT[_kind(path)]) == []
    json.dumps(result, allow_nan=False)  # facts are stored and printed as strict JSON


@pytest.mark.parametrize("kind", sorted(NO_SAMPLE_INPUTS))
def test_handwritten_input_meets_contract(kind: str) -> None:
    # kinds with no public sample: a minimal real-format input meets the contract
    result = parse(kind, NO_SAMPLE_INPUTS[kind])
    assert contract_errors(result, CONTRACT[kind]) == []
    json.dumps(result, allow_nan=False)


def test_contract_checker_reports_problems() -> None:
    # the checker itself catches a missing key, a wrong type and a bool posing as an int
    spec = {"a": INT, "b": ListOf({"c": STR | None})}
    assert contract_errors({"a": 1, "b": [{"c": None}]}, spec) == []
    assert len(contract_errors({"b": [{"c": 3}]}, spec)) == 2
    assert contract_errors({"a": True, "b": []}, spec) != []


def test_unknown_kind_is_a_parse_error() -> None:
    # a KIND outside the contract is refused with the list of known kinds
    with pytest.raises(ParseError, match="unknown kind 'nvidia-smi-bogus'"):
        parse("nvidia-smi-bogus", "anything")
