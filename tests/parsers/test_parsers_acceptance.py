"""The acceptance walk's kinds: dcgmi-diag, gpu-burn, nvbandwidth, ib-write-bw, ib-write-lat, and
ibstat's LIDs and error lines.

Values from the real samples in fixtures/real/ are copied from the sample text by eye; the
hand-written variants (acceptance_variants.py) cover the releases and modes the samples lack,
each built from the tool's own print statements in the release it names.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from probes.parsers import ParseError, parse

from . import acceptance_variants as v

REAL = Path(__file__).resolve().parents[2] / "fixtures" / "real"
MB = 0.008388608  # perftest MB/sec (2^20 bytes) to Gb/s


def facts(name: str) -> dict[str, Any]:
    """Parse fixtures/real/<name> with the KIND its file name starts with."""
    return parse(name.split("__", 1)[0], (REAL / name).read_text(encoding="utf-8"))


# --- perftest bandwidth ------------------------------------------------------------------------


def test_ib_write_bw_report_gbits_4_qps() -> None:
    f = facts("ib-write-bw__dgx-spark-gb10-cx7-4qp-rdma-cm-report-gbits-65536.txt")
    assert {k: f[k] for k in ("test", "device", "link_type", "qps", "connection_type",
                              "mtu_bytes", "use_cuda", "report_unit", "warnings")} == {
        "test": "RDMA_Write BW Test", "device": "rocep1s0f1", "link_type": "IB", "qps": 4,
        "connection_type": "RC", "mtu_bytes": 1024, "use_cuda": False,
        "report_unit": "Gb/sec", "warnings": []}
    assert f["rows"] == [{"size_bytes": 65536, "iterations": 20000, "bw_peak_gbit_s": 111.72,
                          "bw_avg_gbit_s": 111.71, "msg_rate_mpps": 0.213070, "sl": None}]


def test_ib_send_bw_mb_per_sec_converted_to_gbit_s() -> None:
    # perftest MB/sec is 2^20 bytes/s: x 0.008388608 -> Gb/s
    f = facts("ib-write-bw__ib-send-bw-mlx4-connectx3-ib-all-sizes-mb-per-sec-iter-20000.txt")
    assert (f["test"], f["device"], f["report_unit"], f["mtu_bytes"]) == (
        "Send BW Test", "mlx4_0", "MB/sec", 2048)
    assert len(f["rows"]) == 23
    first, last = f["rows"][0], f["rows"][-1]
    assert (first["size_bytes"], first["iterations"]) == (2, 20000)
    assert first["bw_peak_gbit_s"] == pytest.approx(10.17 * MB)
    assert last["size_bytes"] == 8388608
    assert last["bw_avg_gbit_s"] == pytest.approx(3661.76 * MB)  # 30.72 Gb/s on FDR 56
    assert last["msg_rate_mpps"] == 0.000458


def test_ib_write_bw_gpu_memory_run() -> None:
    # the CUDA preamble marks use_cuda and is not a warning; the 6-decimal first row reads fine
    f = facts("ib-write-bw__use-cuda-dmabuf-h200-roce-cx7-all-sizes-report-gbits-gke.txt")
    assert f["use_cuda"] is True and f["warnings"] == []
    assert (f["device"], f["link_type"], f["mtu_bytes"]) == ("mlx5_3", "Ethernet", 4096)
    assert f["rows"][0]["bw_peak_gbit_s"] == 0.057240
    assert f["rows"][-1]["bw_avg_gbit_s"] == 140.40
    assert [r["size_bytes"] for r in f["rows"]] == [2**i for i in range(1, 24)]


def test_ib_write_bw_mib_duration_mode() -> None:
    # 2025+ "MiB/sec" is perftest's 2^20 too; a 0.00 peak (-D) is 0.0, and the WARNING is kept
    f = parse("ib-write-bw", v.IB_WRITE_BW_MIB_DURATION)
    assert f["report_unit"] == "MiB/sec"
    (row,) = f["rows"]
    assert row["bw_peak_gbit_s"] == 0.0
    assert row["bw_avg_gbit_s"] == pytest.approx(47593.71 * MB)
    assert f["warnings"] == ["WARNING: BW peak won't be measured in this run."]
    assert (f["qps"], f["mtu_bytes"]) == (2, 4096)


@pytest.mark.parametrize("variant", ["cpu-util", "qos"])
def test_ib_write_bw_columns_read_by_name(variant: str) -> None:
    # an extra CPU_Util column after MsgRate, or "#sl" before "#iterations", shifts nothing
    f = parse("ib-write-bw", v.VARIANTS["ib-write-bw"][variant])
    (row,) = f["rows"]
    expected = {"cpu-util": (1048576, 5000, 392.11, 391.87, 0.046714),
                "qos": (65536, 5000, 97.42, 97.40, 0.185776)}[variant]
    assert (row["size_bytes"], row["iterations"], row["bw_peak_gbit_s"], row["bw_avg_gbit_s"],
            row["msg_rate_mpps"]) == expected


def test_ib_write_bw_2013_header() -> None:
    # "Device : mlx4_0" (one space) and "Mtu : 2048B" (no brackets) of early-2013 perftest
    f = parse("ib-write-bw", v.IB_WRITE_BW_2013)
    assert (f["device"], f["qps"], f["mtu_bytes"], f["report_unit"]) == (
        "mlx4_0", 1, 2048, "MB/sec")
    assert f["rows"][0]["bw_avg_gbit_s"] == pytest.approx(3249.52 * MB)


def test_ib_write_bw_layout_noise_does_not_change_the_result() -> None:
    # indentation, TABs between columns and the server's "Waiting for client" banner
    name = "ib-write-bw__ib-send-bw-mlx4-connectx3-ib-all-sizes-mb-per-sec-iter-20000.txt"
    text = (REAL / name).read_text()
    noisy = ("\n************************************\n* Waiting for client to connect... *\n"
             "************************************\n"
             + "\n".join("\t" + "\t".join(line.split("   ")) for line in text.splitlines()))
    assert parse("ib-write-bw", noisy) == parse("ib-write-bw", text)


def test_ib_write_bw_refuses_a_latency_table() -> None:
    text = (REAL / "ib-write-lat__dgx-spark-gb10-cx7-rocep1s0f1-rdma-cm-2-bytes.txt").read_text()
    with pytest.raises(ParseError, match=r"^not ib_write_bw"):
        parse("ib-write-bw", text)


# --- perftest latency --------------------------------------------------------------------------


def test_ib_write_lat_full_percentile_row() -> None:
    f = facts("ib-write-lat__dgx-spark-gb10-cx7-rocep1s0f1-rdma-cm-2-bytes.txt")
    assert (f["test"], f["device"], f["link_type"], f["warnings"]) == (
        "RDMA_Write Latency Test", "rocep1s0f1", "IB", [])
    assert f["rows"] == [{"size_bytes": 2, "iterations": 1000, "t_min_us": 1.42,
                          "t_max_us": 1.93, "t_typical_us": 1.47, "t_avg_us": 1.47,
                          "t_stdev_us": 0.0, "p99_us": 1.57, "p999_us": 1.93,
                          "tps_average": None}]


def test_ib_read_lat_cpu_frequency_warning_between_header_and_row() -> None:
    f = facts("ib-write-lat__ib-read-lat-mlx4-connectx3-2-bytes-single-row.txt")
    assert f["test"] == "RDMA_Read Latency Test"
    assert f["warnings"] == ["Conflicting CPU frequency values detected: 2400.000000 != "
                             "1873.463000. CPU Frequency is not max."]
    (row,) = f["rows"]
    assert (row["t_max_us"], row["t_avg_us"], row["p99_us"], row["p999_us"]) == (
        6.12, 1.80, 1.88, 6.12)


def test_ib_send_lat_2013_three_columns() -> None:
    # columns the old header lacks are null, not borrowed from a neighbour
    f = parse("ib-write-lat", v.IB_SEND_LAT_2013)
    assert (f["test"], f["device"], f["connection_type"], f["mtu_bytes"]) == (
        "Send Latency Test", "mlx4_0", "UC", 2048)
    assert [(r["t_min_us"], r["t_max_us"], r["t_typical_us"], r["t_avg_us"], r["p99_us"])
            for r in f["rows"]] == [(0.92, 5.06, 0.95, None, None), (0.93, 3.32, 0.96, None, None)]


def test_ib_write_lat_duration_mode() -> None:
    f = parse("ib-write-lat", v.IB_WRITE_LAT_DURATION)
    (row,) = f["rows"]
    assert (row["t_avg_us"], row["t_min_us"], row["t_stdev_us"], row["tps_average"]) == (
        1.10, None, None, 903412.51)


def test_ib_write_lat_rows_with_tabs() -> None:
    # rows separated by TABs and spaces read the same
    name = "ib-write-lat__dgx-spark-gb10-cx7-rocep1s0f1-rdma-cm-2-bytes.txt"
    text = (REAL / name).read_text()
    tabbed = text.replace("          1.42           1.93", "\t1.42\t \t1.93")
    assert tabbed != text
    assert parse("ib-write-lat", tabbed) == parse("ib-write-lat", text)


# --- ibstat: LIDs and lines outside the CA blocks ------------------------------------------------


def test_ibstat_lids_as_printed() -> None:
    f = facts("ibstat__11-cas-connectx8-down-connectx7-active-b300-host.txt")
    ports = {ca["name"]: ca["ports"][0] for ca in f["cas"]}
    assert (ports["mlx5_0"]["base_lid"], ports["mlx5_0"]["sm_lid"]) == (65535, 0)
    assert (ports["mlx5_2"]["base_lid"], ports["mlx5_2"]["sm_lid"]) == (1, 1)
    assert f["errors"] == []
    f = facts("ibstat__12-cas-h100-node-8x-cx7-ndr400-plus-cx6dx-eth-tabs.txt")
    ports = {ca["name"]: ca["ports"][0] for ca in f["cas"]}
    assert (ports["mlx5_0"]["base_lid"], ports["mlx5_0"]["sm_lid"]) == (75, 334)
    assert (ports["mlx5_1"]["base_lid"], ports["mlx5_1"]["link_layer"]) == (0, "Ethernet")


def test_ibstat_ibpanic_keeps_the_cas_before_it() -> None:
    f = parse("ibstat", v.IBSTAT_IBPANIC)
    assert [ca["name"] for ca in f["cas"]] == ["mlx5_0"]
    port = f["cas"][0]["ports"][0]
    # no subnet manager swept this port: Initializing with SM lid 0
    assert (port["state"], port["sm_lid"], port["base_lid"]) == ("Initializing", 0, 65535)
    assert f["errors"] == [
        "ibwarn: [40922] main: stat of IB device 'mlx5_1' failed",
        "ibpanic: [40922] main: stat of IB device 'mlx5_1' failed: No such device",
    ]


def test_ibstat_error_before_the_cas_and_alone() -> None:
    # stdout is flushed at exit, so stderr's panic can come first; a panic alone is still ibstat
    panic = "ibpanic: [7] main: can't list IB device names: No such file or directory"
    f = parse("ibstat", panic + "\n" + v.IBSTAT_IBPANIC.split("ibwarn")[0])
    assert f["errors"] == [panic] and len(f["cas"]) == 1
    assert parse("ibstat", panic + "\n") == {"cas": [], "errors": [panic]}
    exit_line = "ibstat: iberror: failed: 'mlx5_9' IB device can't be found"
    assert parse("ibstat", exit_line + "\n")["errors"] == [exit_line]
