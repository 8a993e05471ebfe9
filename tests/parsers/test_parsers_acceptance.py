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


# --- dcgmi-diag, real samples -------------------------------------------------------------------


def test_dcgmi_4x_per_gpu_rows_all_pass() -> None:
    # DCGM 4.6.1: Metadata rows, lowercase plugin names, "GPUn: Pass" rows fill ``gpus``
    f = facts("dcgmi-diag__r3-dcgm4.6.1-7x-b300-per-gpu-rows-all-pass.txt")
    assert (f["format"], f["level"]) == ("table", None)
    assert (f["dcgm_version"], f["driver_version"]) == ("4.6.1", "610.57.04")
    assert f["device_ids"] == ["3182"] * 7
    assert [(t["name"], t["category"]) for t in f["tests"]] == [
        ("software", "Deployment"),
        ("memory", "Hardware"),
        ("diagnostic", "Hardware"),
        ("nvbandwidth", "Hardware"),
        ("pcie", "Integration"),
        ("memory_bandwidth", "Stress"),
        ("targeted_stress", "Stress"),
        ("targeted_power", "Stress"),
    ]
    assert all(t["status"] == "Pass" and t["messages"] == [] for t in f["tests"])
    assert all(t["gpus"] == {str(i): "Pass" for i in range(7)} for t in f["tests"])
    assert (f["failed_tests"], f["gpu_ids"], f["errors"]) == ([], list(range(7)), [])


def test_dcgmi_old_layout_pass_all() -> None:
    # DCGM 2.x: no Metadata, "Pass - All" ({} gpus); the Hardware test named "Diagnostic" is a
    # test, not the table's "Diagnostic | Result" header
    f = facts("dcgmi-diag__r4-old-layout-blacklist-pass-all-pulse-memtest-fair-cluster.txt")
    assert f["dcgm_version"] is None and f["driver_version"] is None and f["device_ids"] == []
    names = [t["name"] for t in f["tests"]]
    assert len(names) == 18
    assert names[:2] == ["Blacklist", "NVML Library"] and names[-1] == "Memtest"
    diagnostic = f["tests"][names.index("Diagnostic")]
    assert diagnostic == {"name": "Diagnostic", "category": "Hardware", "status": "Pass",
                          "gpus": {}, "messages": [], "codes": []}
    assert {t["status"] for t in f["tests"]} == {"Pass"}
    assert f["gpu_ids"] == [] and f["failed_tests"] == []


def test_dcgmi_split_row_takes_the_worst_and_joins_the_wrapped_warning() -> None:
    # "Pass - GPUs: 1..7" + "Fail - GPU: 0" is a Fail; the warning wrapped mid-word is rejoined
    f = facts("dcgmi-diag__r2-fragment-gpu-memory-pass-gpus-1-7-fail-gpu-0-thermal-violation-"
              "excerpt.txt")
    (test,) = f["tests"]
    assert test["name"] == "GPU Memory" and test["category"] is None
    assert test["status"] == "Fail"
    assert test["gpus"] == {**{str(i): "Pass" for i in range(1, 8)}, "0": "Fail"}
    assert test["messages"] == [
        "GPU 0 Thermal violations totaling 13.3 seconds started at 9.7 seconds into the test "
        "for GPU 0 Verify that the cooling on this machine is functional, including external, "
        "thermal mat"
    ]
    assert f["failed_tests"] == ["GPU Memory"]
    assert f["gpu_ids"] == list(range(8))


def test_dcgmi_deployment_error_outside_a_test() -> None:
    # an Error row straight under the Deployment header belongs to no test: ``errors``
    f = facts("dcgmi-diag__deployment-error-row-remappings-pending-gpu3-table-head-excerpt.txt")
    assert f["tests"] == []
    assert f["errors"] == [
        "GPU 3 has uncorrectable memory errors and row remappings are pending"
    ]
    assert f["gpu_ids"] == [3]


# --- dcgmi-diag, other releases and forms --------------------------------------------------------


def test_dcgmi_33_table() -> None:
    # DCGM 3.3: ","-joined device ids, Error rows of a Deployment test, split rows Pass/Warn/Skip
    f = parse("dcgmi-diag", v.DCGM33_TABLE)
    assert f["device_ids"] == ["2330"] * 4
    by_name = {t["name"]: t for t in f["tests"]}
    # 3.2+ sets only WARN for persistence mode; dcgmi 3.x prints that Warn as "Fail"
    assert by_name["Persistence Mode"]["status"] == "Warn"
    assert by_name["Persistence Mode"]["messages"] == [
        "Persistence mode for GPU 1 is disabled. Enable persistence mode by running "
        "\"nvidia-smi -i <gpuId> -pm 1 \" as root."
    ]
    assert by_name["Inforom"]["status"] == "Skip"
    assert by_name["GPU Memory"]["gpus"] == {"0": "Pass", "1": "Pass", "3": "Pass", "2": "Fail"}
    assert by_name["GPU Memory"]["messages"] == [v.THERMAL]
    # "Warn - All" and its "Code: (...)" row, which is not part of the warning
    assert by_name["Diagnostic"]["status"] == "Warn"
    assert by_name["Diagnostic"]["messages"] == [
        "Detected clocks event due to thermal violation in GPU 0."
    ]
    stress = by_name["Targeted Stress"]
    assert stress["status"] == "Warn"  # worst of Pass, Warn, Skip
    assert stress["gpus"] == {"0": "Pass", "1": "Pass", "3": "Warn", "2": "Skip"}
    assert by_name["Targeted Power"]["status"] == "Skip"
    assert f["failed_tests"] == ["GPU Memory"]
    assert f["gpu_ids"] == [0, 1, 2, 3]


def test_dcgmi_4x_table_with_entity_warnings() -> None:
    # DCGM 4.x: the test row's own result is the status; "Warning: GPU1" rows are messages,
    # "Info: GPU0" rows are not; "Not Run" for an entity reads as Skip
    f = parse("dcgmi-diag", v.DCGM4_TABLE)
    software, memory, pcie, stress = f["tests"]
    # GPU0's "Fail" under a Warn test row is that GPU's Warn (4.x prints entity Warns as Fail)
    assert software["status"] == "Warn" and software["gpus"] == {"0": "Warn", "1": "Pass"}
    assert software["messages"] == ["Persistence Mode: Persistence mode for GPU 0 is disabled."]
    assert memory["status"] == "Fail" and memory["gpus"] == {"0": "Pass", "1": "Fail"}
    assert memory["messages"] == [v.ECC]
    assert pcie["gpus"] == {"0": "Pass", "1": "Skip"}
    assert stress["status"] == "Skip"
    assert f["failed_tests"] == ["memory"]


def test_dcgmi_message_piece_ending_in_a_space_keeps_it() -> None:
    # a 45-character piece whose last character is a space: padding is removed, the space is not
    f = parse("dcgmi-diag", v.SPACE_AT_CUT_TABLE)
    assert v.SPACE_AT_CUT[44] == " "
    assert f["tests"][0]["messages"] == [v.SPACE_AT_CUT]


def test_dcgmi_gpu_list_cut_by_the_cell_width() -> None:
    # "Pass - GPUs: 0, ..., 1..." is cut at 46 characters: the cut id is not guessed
    f = parse("dcgmi-diag", v.SIXTEEN_GPUS_TABLE)
    assert f["tests"][0]["gpus"] == {**{str(i): "Pass" for i in range(10)}, "15": "Fail"}
    assert f["tests"][0]["status"] == "Fail"


@pytest.mark.parametrize(
    ("text", "version", "driver", "device_ids"),
    [
        (v.DCGM24_JSON, None, None, []),
        (v.DCGM33_JSON, "3.3.9", "550.90.07", ["20b0", "20b0"]),
        (v.DCGM4_JSON, "4.2.3", "570.124.06", ["2330", "2330"]),
    ],
    ids=["2.4", "3.3", "4.x"],
)
def test_dcgmi_json_versions(text: str, version: str | None, driver: str | None,
                             device_ids: list[str]) -> None:
    # versions and device ids from where each release puts them (4.x: only the GPU group)
    f = parse("dcgmi-diag", text)
    assert f["format"] == "json" and f["level"] is None
    assert (f["dcgm_version"], f["driver_version"], f["device_ids"]) == (version, driver,
                                                                        device_ids)


def test_dcgmi_json_24_string_warnings_and_gpu_ids() -> None:
    f = parse("dcgmi-diag", v.DCGM24_JSON)
    assert [(t["name"], t["category"], t["status"]) for t in f["tests"]] == [
        ("Blacklist", "Deployment", "Pass"),
        ("Persistence Mode", "Deployment", "Fail"),
        ("GPU Memory", "Hardware", "Fail"),
    ]
    assert f["tests"][1]["messages"] == ["Persistence mode for GPU 0 is disabled."]
    assert f["tests"][2]["gpus"] == {"0": "Pass", "1": "Fail"}
    assert f["gpu_ids"] == [0, 1]


def test_dcgmi_json_33_gpu_id_and_inner_warnings_key() -> None:
    f = parse("dcgmi-diag", v.DCGM33_JSON)
    remap, pcie = f["tests"][1], f["tests"][2]
    assert remap["gpus"] == {"1": "Fail"}
    assert remap["messages"] == ["GPU 1 had memory errors and row remappings are pending"]
    assert pcie["status"] == "Warn" and pcie["gpus"] == {"0": "Pass", "1": "Warn"}
    assert f["failed_tests"] == ["Page Retirement/Row Remap"]


def test_dcgmi_json_4x_summary_and_entities() -> None:
    # test_summary gives the status and repeats result warnings (kept once); CPU entities are
    # not GPUs
    f = parse("dcgmi-diag", v.DCGM4_JSON)
    _, memory, cpu = f["tests"]
    assert memory["status"] == "Fail" and memory["gpus"] == {"0": "Pass", "1": "Fail"}
    assert memory["messages"] == [v.ECC, "The memory test was cut short after 30 seconds."]
    assert cpu["gpus"] == {} and cpu["status"] == "Pass"
    assert f["gpu_ids"] == [0, 1]


def test_dcgmi_json_runtime_error_and_iterations() -> None:
    f = parse("dcgmi-diag", v.DCGM4_RUNTIME_ERROR_JSON)
    assert f["tests"] == [] and f["dcgm_version"] == "4.2.3"
    # the diagnostic did not run: a run error, not an error a GPU reported
    assert f["run_error"] == "Error: Diagnostic could not be run while DCGM is paused."
    assert f["errors"] == []
    f = parse("dcgmi-diag", v.DCGM4_ITERATIONS_JSON)
    assert [t["name"] for t in f["tests"]] == ["software", "memory", "cpu_eud"] * 2
    # the series stopped on the failed memory test, which says so itself
    assert f["errors"] == [] and f["run_error"] is None and "memory" in f["failed_tests"]


def test_dcgmi_json_after_a_banner_line() -> None:
    # a banner printed before the document does not hide it
    f = parse("dcgmi-diag", "Successfully ran diagnostic for group.\n" + v.DCGM4_JSON)
    assert f["format"] == "json" and len(f["tests"]) == 3


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        (v.DCGMI_ERROR_ONLY, "dcgmi said: Error: Unable to complete diagnostic for group 2"),
        (v.DCGM4_JSON[: len(v.DCGM4_JSON) // 2], "JSON document does not decode"),
        ('{"jobs": [{"jobname": "randread"}]}', "JSON document without"),
        ("Successfully ran diagnostic for group.\n", "no \"| Diagnostic | Result |\""),
    ],
    ids=["dcgmi-error-only", "cut-json", "foreign-json", "banner-only"],
)
def test_dcgmi_refuses_what_is_no_result(text: str, reason: str) -> None:
    # no table and no document: exit 2 with one line that says why (and what dcgmi said)
    with pytest.raises(ParseError, match=r"^not dcgmi diag output: ") as info:
        parse("dcgmi-diag", text)
    assert reason in str(info.value)


# --- gpu-burn ----------------------------------------------------------------------------------


def test_gpu_burn_verdict_block_all_ok() -> None:
    f = facts("gpu-burn__7x-b300-600s-all-ok-progress-elided-by-author.txt")
    assert f["duration_s"] == 600
    assert f["gpu_names"] == {str(i): "NVIDIA B300 SXM6 AC" for i in range(7)}
    assert f["gpus_tested"] == 7
    assert f["verdicts"] == {str(i): "OK" for i in range(7)}
    assert f["faulty"] == [] and f["last_progress"] is None
    assert (f["warning"], f["died"]) == (False, False)


def test_gpu_burn_no_verdict_block() -> None:
    # the run printed progress but no "Tested N GPUs" block: no verdict is invented
    f = facts("gpu-burn__1x-rtx-a500-embedded-progress-lines-no-tested-verdict.txt")
    assert f["duration_s"] == 10
    assert f["gpu_names"] == {"0": "NVIDIA RTX A500 Embedded GPU"}
    assert (f["gpus_tested"], f["verdicts"], f["faulty"]) == (None, {}, [])
    assert f["last_progress"] == {"percent": 100.0, "gflops": [3519.0], "errors": [0],
                                  "temps_c": [53]}


def test_gpu_burn_old_wording() -> None:
    # "Burning for 10 secs" on the same line as "Run length not specified"
    f = facts("gpu-burn__1x-tesla-k80-azure-old-version-tab-summary-lines-excerpt.txt")
    assert f["duration_s"] == 10 and f["gpu_names"] == {"0": "Tesla K80"}
    assert f["last_progress"] == {"percent": 100.0, "gflops": [2273.0], "errors": [0],
                                  "temps_c": [66]}


def test_gpu_burn_2017_layout_faulty_gpu() -> None:
    # "/" between GPUs, no Gflop/s, "(WARNING!)", a missing temperature "--", FAULTY verdict
    f = parse("gpu-burn", v.GPU_BURN_2017)
    assert f["duration_s"] is None
    assert f["gpus_tested"] == 2 and f["verdicts"] == {"0": "OK", "1": "FAULTY"}
    assert f["faulty"] == [1]
    assert f["last_progress"] == {"percent": 100.0, "gflops": [], "errors": [0, 3],
                                  "temps_c": [60, 61]}
    assert f["warning"] is True and f["died"] is False


def test_gpu_burn_died_gpu() -> None:
    # a dead GPU: "-1 (0 Gflop/s)", "(DIED!)", temperature "--" kept as null
    f = parse("gpu-burn", v.GPU_BURN_DIED)
    assert f["died"] is True and f["gpus_tested"] is None
    assert f["last_progress"] == {"percent": 50.0, "gflops": [51234.0, 0.0], "errors": [0, 0],
                                  "temps_c": [65, None]}


def test_gpu_burn_negative_error_count_and_carriage_returns() -> None:
    # progress rewritten with \r on one physical line; the last one wins; negative counts kept
    text = ("Burning for 30 seconds.\n\r10.0%  proc'd: 5 (900 Gflop/s) - 5 (901 Gflop/s) - 5 "
            "(902 Gflop/s)   errors: 0 - 0 - 0   temps: 40 C - 41 C - 40 C \r20.0%  proc'd: 10 "
            "(950 Gflop/s) - 9 (940 Gflop/s) - 9 (941 Gflop/s)   errors: 0 - -524288000  "
            "(WARNING!)- -2  (WARNING!)  temps: 45 C - 46 C - 45 C ")
    f = parse("gpu-burn", text)
    assert f["last_progress"] == {"percent": 20.0, "gflops": [950.0, 940.0, 941.0],
                                  "errors": [0, -524288000, -2], "temps_c": [45, 46, 45]}


def test_gpu_burn_needs_its_own_lines() -> None:
    # nvidia-smi -L alone is not a gpu_burn run
    with pytest.raises(ParseError, match=r"^not gpu_burn output: "):
        parse("gpu-burn", "GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-1234)\n")


# --- nvbandwidth -------------------------------------------------------------------------------


def test_nvbandwidth_v010_all_ce_tests() -> None:
    f = facts("nvbandwidth__v0.10-7x-b300-ce-tests-with-coefficient-of-variation-part.txt")
    assert (f["version"], f["driver_version"]) == ("v0.10.0", "610.57.04")
    assert len(f["tests"]) == 16
    first = f["tests"][0]
    assert (first["name"], first["unit"]) == ("host_to_device_memcpy_ce", "GB/s")
    assert first["matrices"] == [{"label": None, "cells": {"0": {
        "0": 55.59, "1": 55.60, "2": 55.61, "3": 55.60, "4": 55.59, "5": 55.60, "6": 55.59}}}]
    read = next(t for t in f["tests"] if t["name"] == "device_to_device_memcpy_read_ce")
    assert read["matrices"][0]["cells"]["0"]["0"] is None
    assert read["matrices"][0]["cells"]["1"]["0"] == 765.80
    bidir = next(t for t in f["tests"]
                 if t["name"] == "device_to_device_bidirectional_memcpy_write_ce")
    assert [m["label"] for m in bidir["matrices"]] == ["Write1", "Write2", "Total"]
    assert f["sums_gb_s"]["device_to_device_bidirectional_memcpy_read_ce_total"] == 63881.74
    assert f["sums_gb_s"]["one_to_all_read_ce"] == 5568.48
    assert len(f["sums_gb_s"]) == 20 and f["sums_ns"] == {}


def test_nvbandwidth_sums_match_their_matrices() -> None:
    # every SUM line equals the sum of the matrix printed just above it (to print precision)
    f = facts("nvbandwidth__v0.10-7x-b300-ce-tests-with-coefficient-of-variation-part.txt")
    matrices = [m for t in f["tests"] for m in t["matrices"]]
    sums = list(f["sums_gb_s"].values())
    assert len(matrices) == len(sums)
    for matrix, total in zip(matrices, sums, strict=True):
        cells = [x for row in matrix["cells"].values() for x in row.values() if x is not None]
        assert sum(cells) == pytest.approx(total, abs=0.01 * len(cells))


@pytest.mark.parametrize(
    ("name", "test", "value"),
    [
        ("nvbandwidth__v0.5-1x-a10-h2d-ce-single-test-old-header-device-line.txt",
         "host_to_device_memcpy_ce", 25.17),
        ("nvbandwidth__v0.5-1x-gh200-d2h-ce-c2c-272gbs-with-perf-stat-trailer.txt",
         "device_to_host_memcpy_ce", 272.94),
    ],
)
def test_nvbandwidth_v05_single_test(name: str, test: str, value: float) -> None:
    # v0.5 header (NOTE paragraph, integer CUDA versions); perf stat's trailer is ignored
    f = facts(name)
    assert (f["version"], f["driver_version"]) == ("v0.5", "550.54.15")
    assert [t["name"] for t in f["tests"]] == [test]
    assert f["tests"][0]["matrices"] == [{"label": None, "cells": {"0": {"0": value}}}]
    assert f["sums_gb_s"] == {test: value}


def test_nvbandwidth_latency_in_ns_and_waived_line() -> None:
    f = parse("nvbandwidth", v.NVBANDWIDTH_LATENCY)
    latency, bidir = f["tests"]
    assert latency["unit"] == "ns"
    assert latency["matrices"] == [{"label": None, "cells": {"0": {"0": 771.58, "1": 769.21}}}]
    assert f["sums_ns"] == {"host_device_latency_sm": 1540.79}
    assert bidir["unit"] == "GB/s"
    assert [m["label"] for m in bidir["matrices"]] == ["Write1", "Write2", "Total"]
    assert f["sums_gb_s"]["device_to_device_bidirectional_memcpy_write_ce_total"] == 1459.37


def test_nvbandwidth_v02_and_perf_formatter() -> None:
    f = parse("nvbandwidth", v.NVBANDWIDTH_V02)
    assert f["version"] == "v0.2"
    assert f["tests"][0]["matrices"][0]["cells"] == {"0": {"0": None, "1": 274.92},
                                                     "1": {"0": 275.03, "1": None}}
    f = parse("nvbandwidth", v.NVBANDWIDTH_PERF)
    assert f["sums_gb_s"] == {} and f["perf_gb_s"] == {"host_to_device_memcpy_ce": 55.12}


def test_nvbandwidth_json_output() -> None:
    # -j: the same keys; the bidirectional test's appended rows split into its three matrices
    f = parse("nvbandwidth", v.NVBANDWIDTH_JSON)
    assert (f["version"], f["driver_version"]) == ("v0.8", "570.124.06")
    h2d, bidir, latency, waived = f["tests"]
    assert h2d["matrices"] == [{"label": None, "cells": {"0": {"0": 55.1234, "1": 55.0987}}}]
    assert [m["label"] for m in bidir["matrices"]] == ["Read1", "Read2", "Total"]
    assert bidir["matrices"][2]["cells"] == {"0": {"0": None, "1": 729.67},
                                             "1": {"0": 729.7, "1": None}}
    assert (latency["unit"], waived["unit"], waived["matrices"]) == ("ns", None, [])
    assert f["sums_ns"] == {"host_device_latency_sm": 1540.79}
    assert f["sums_gb_s"] == {"host_to_device_memcpy_ce": 110.2221,
                              "device_to_device_bidirectional_memcpy_read_ce": 1459.37}
    with pytest.raises(ParseError, match="JSON document without"):
        parse("nvbandwidth", '{"jobs": []}')


def test_nvbandwidth_two_runs_concatenated() -> None:
    # tests of every run, in order
    text = (REAL / "nvbandwidth__v0.5-1x-a10-h2d-ce-single-test-old-header-device-line.txt")
    f = parse("nvbandwidth", text.read_text() + "\n" + v.NVBANDWIDTH_V02)
    assert [t["name"] for t in f["tests"]] == ["host_to_device_memcpy_ce",
                                               "device_to_device_memcpy_read_ce"]


def test_nvbandwidth_failed_test_keeps_its_error_lines() -> None:
    # a data-check failure instead of a matrix (v0.7): the test is there, without figures
    text = ("nvbandwidth Version: v0.7\n\nRunning device_to_device_memcpy_read_ce.\n"
            " Invalid value when checking the pattern at 0x70a640000000\n"
            " Current offset : 11136 \n"
            "ASSERT in expression h_errorFlag == 0 in void memcmpPatternHelper() : "
            "memcpy.cpp:165\n")
    (test,) = parse("nvbandwidth", text)["tests"]
    assert (test["unit"], test["matrices"]) == (None, [])
    assert test["errors"] == [
        "Invalid value when checking the pattern at 0x70a640000000",
        "ASSERT in expression h_errorFlag == 0 in void memcmpPatternHelper() : memcpy.cpp:165",
    ]


def test_nvbandwidth_quoted_running_line() -> None:
    # "> Running x." (a Markdown quote on that line) still opens the test
    text = ("> Running host_to_device_memcpy_sm.\nmemcpy SM CPU(row) -> GPU(column) bandwidth "
            "(GB/s)\n0         1\n0     35.19     35.25\n")
    (test,) = parse("nvbandwidth", text)["tests"]
    assert test["matrices"] == [{"label": None, "cells": {"0": {"0": 35.19, "1": 35.25}}}]


def test_nvbandwidth_header_only_is_refused() -> None:
    with pytest.raises(ParseError, match="printed only its header"):
        parse("nvbandwidth", "nvbandwidth Version: v0.8\nBuilt from Git version: v0.8\n")


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


# --- the four tools: a paste quoted in Markdown -----------------------------------------------

QUOTABLE = sorted(p.name for kind in ("dcgmi-diag", "gpu-burn", "nvbandwidth", "ib-write-bw",
                                      "ib-write-lat") for p in REAL.glob(f"{kind}__*.txt"))


@pytest.mark.parametrize("name", QUOTABLE)
def test_markdown_quoted_paste_reads_the_same(name: str) -> None:
    # a reply quoting the output puts "> " before every line; none of these tools starts a
    # line with ">", so the marker is dropped and the facts do not change
    text = (REAL / name).read_text(encoding="utf-8")
    quoted = "".join("> " + line for line in text.splitlines(keepends=True))
    kind = name.split("__", 1)[0]
    assert parse(kind, quoted) == parse(kind, text)


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
