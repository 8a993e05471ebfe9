"""Tool output across tool versions: one test per format variant, built from the tool's own
format strings (its source or documentation), not from the samples.

Each section names the tool, where its format was read, and the versions whose layout a test
reproduces. Python's ``%`` formatting is C's printf for these conversions, so a table built here
with the tool's format string is byte for byte what that version prints.
"""
# The tools' printf formats are kept verbatim, so %-formatting is the point here.
# ruff: noqa: UP031

from __future__ import annotations

from probes.parsers import parse

# --- nccl-tests (NVIDIA/nccl-tests: src/common.cu, src/util.cu, src/common.h, per version) -----


def _nccl_2017_row(size: int, ms: float, bus: float, delta: float) -> str:
    # b188a15 (2017, v1): print_line_header + BenchTime, time in ms, "res" = max rel. error
    head = "%12li  %12li  %6s  %6s" % (size, size // 4, "float", "sum")
    half = "  %7.3f  %5.2f  %5.2f  %7.0le" % (ms, bus, bus, delta)
    return head + half + half + "\n"


def test_nccl_tests_2017_v1_layout() -> None:
    # 2017: "bytes N type op" header, "res" columns, summary lines without "#", and the
    # failure macros' old wording ("NCCL failure file:line 'msg'")
    text = ("# %10s  %12s  %6s  %6s        out-of-place                    in-place\n"
            % ("", "", "", "")
            + "# %10s  %12s  %6s  %6s  %7s  %5s  %5s  %7s  %7s  %5s  %5s  %7s\n"
            % ("bytes", "N", "type", "op", "time", "algbw", "busbw", "res", "time", "algbw",
               "busbw", "res")
            + _nccl_2017_row(1048576, 0.104, 10.05, 0) + _nccl_2017_row(33554432, 1.204, 27.87, 0)
            + " Out of bounds values : %d %s\n" % (0, "OK")
            + " Avg bus bandwidth    : %g %s\n" % (18.96, "")
            + "NCCL failure common.cu:393 'unhandled system error'\n")
    f = parse("nccl-tests", text)
    assert [r["size_bytes"] for r in f["rows"]] == [1048576, 33554432]
    assert f["rows"][1]["busbw_ip_gb_s"] == 27.87 and f["rows"][1]["redop"] == "sum"
    assert f["rows"][0]["wrong_oop"] is None and f["rows"][0]["error_oop"] == 0.0
    assert f["old_layout"] is True and f["completed"] is True
    assert (f["avg_busbw_gb_s"], f["out_of_bounds"], f["wrong"]) == (18.96, 0, 0)
    assert f["test_failures"] == []  # the contract's three spellings only
    assert f["other_failures"] == ["NCCL failure common.cu:393 'unhandled system error'"]


def _nccl_2019(test: str) -> str:
    # cbe7f65 (NCCL 2.4 resync, 2019) to 51af557: per-test print_header/print_line_header,
    # time in us ("%7.1f"), "error" column "%5.0le"
    cols = {"all_reduce": ["redop"], "all_gather": [], "broadcast": ["root"]}[test]
    lead = "# %10s  %12s  %6s" + "  %6s" * len(cols)
    text = (lead % ("", "", "", *[""] * len(cols))
            + "            out-of-place                       in-place          \n"
            + (lead + "  %7s  %6s  %6s  %5s  %7s  %6s  %6s  %5s\n")
            % ("size", "count", "type", *cols, "time", "algbw", "busbw", "error", "time", "algbw",
               "busbw", "error"))
    for size, us, bus in ((8388608, 201.5, 78.04), (134217728, 1398.1, 179.9)):
        head = "%12li  %12li  %6s" % (size, size // 4, "float")
        if test == "all_reduce":
            head += "  %6s" % "sum"
        elif test == "broadcast":
            head += "  %6i" % 0
        half = "  %7s  %6.2f  %6.2f  %5.0le" % ("%7.1f" % us, bus / 2, bus, 2e-07)
        text += head + half + half + "\n"
    return text + "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 128.97 \n#\n"


def test_nccl_tests_2019_all_reduce_error_column() -> None:
    f = parse("nccl-tests", _nccl_2019("all_reduce"))
    assert f["old_layout"] is True and len(f["rows"]) == 2
    row = f["rows"][1]
    assert (row["redop"], row["root"], row["busbw_oop_gb_s"], row["error_ip"]) == (
        "sum", None, 179.9, 2e-07)
    assert (row["wrong_oop"], row["wrong_ip"]) == (None, None)
    assert f["wrong"] == 0  # from the Out of bounds line


def test_nccl_tests_2019_all_gather_has_no_redop_cell() -> None:
    f = parse("nccl-tests", _nccl_2019("all_gather"))
    assert [(r["size_bytes"], r["redop"], r["root"]) for r in f["rows"]] == [
        (8388608, None, None), (134217728, None, None)]
    assert f["rows"][0]["time_oop_us"] == 201.5


def test_nccl_tests_2019_broadcast_root_cell() -> None:
    f = parse("nccl-tests", _nccl_2019("broadcast"))
    assert [r["root"] for r in f["rows"]] == [0, 0]
    assert f["rows"][1]["busbw_ip_gb_s"] == 179.9


def _nccl_2022(rows: list[tuple[int, str, float]], *, redop: str = "sum") -> str:
    # 51af557 (NCCL 2.13 resync, Aug 2022): "%12li  %12li  %8s  %6s  %6s" then per half
    # "  %7s  %6.2f  %6.2f  %5g" with #wrong = (double)wrongElts
    text = ("# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place"
            "          \n" % ("", "", "", "", "")
            + "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s %6s  %7s  %6s  %6s %6s\n"
            % ("size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong",
               "time", "algbw", "busbw", "#wrong"))
    for size, wrong_fmt, wrong in rows:
        head = "%12li  %12li  %8s  %6s  %6s" % (size, size // 4, "float", redop, "%6i" % -1)
        half = "  %7s  %6.2f  %6.2f  " % ("%7.1f" % 512.3, 16.37, 30.69) + wrong_fmt % wrong
        text += head + half + half + "\n"
    return text


def test_nccl_tests_2022_wrong_in_exponent_form() -> None:
    # %5g prints a count of a million or more in exponent form: 1048576 -> "1.04858e+06",
    # which is 1048580 as printed (the digits %g dropped are gone)
    text = _nccl_2022([(4194304, "%5g", 0), (8388608, "%5g", 1048576.0),
                       (16777216, "%5g", 268435456.0), (33554432, "%5g", 1000000.0)])
    f = parse("nccl-tests", text)
    assert f["old_layout"] is False
    assert [r["wrong_oop"] for r in f["rows"]] == [0, 1048580, 268435000, 1000000]
    assert f["out_of_bounds"] is None and f["completed"] is False
    assert f["wrong"] == 2 * (1048580 + 268435000 + 1000000)  # no summary: the cells' sum


def test_nccl_tests_2022_all_gather_blank_redop_cell() -> None:
    # between the 2.13 resync and Sep 2022 all_gather printed "" as its redop: the row goes
    # straight from the type to the root "-1"
    f = parse("nccl-tests", _nccl_2022([(1048576, "%5g", 0)], redop=""))
    (row,) = f["rows"]
    assert (row["redop"], row["root"], row["busbw_ip_gb_s"], row["wrong_ip"]) == (
        None, -1, 30.69, 0)


def _nccl_2_19_row(size: int, time_s: str, wrong: float | None, stamp: str = "") -> str:
    # util.cu (2.17-2.19): writeBenchmarkLinePreamble + writeBenchmarkLineBody, "%6g" #wrong
    head = "%12li  %12li  %8s  %6s  %6s" % (size, size // 4, "float", "sum", "%6i" % -1)
    cell = "  %6g" % wrong if wrong is not None else "    N/A"
    half = "  %7s  %6s  %6s" % (time_s, "%6.2f" % 151.2, "%6.2f" % 283.5) + cell
    return head + half + half + stamp + "\n"


HEADER_2_19 = (
    "# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place          \n"
    % ("", "", "", "", "")
    + "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %*s\n"
    % ("size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time",
       "algbw", "busbw", "#wrong", 0, ""))


def test_nccl_tests_2_19_exponent_time_and_wrong() -> None:
    # getFloatStr falls back to "%.1e" for a time that does not fit 7 columns
    text = (HEADER_2_19 + _nccl_2_19_row(17179869184, "%7.1e" % 60612345.0, 2.68435e+08)
            + "# %-20s : %d %s\n" % ("Out of bounds values", 2, "FAILED")
            + "# %-20s : %g %s\n" % ("Avg bus bandwidth", 283.5, "")
            + "#\n# Collective test concluded: all_reduce_perf\n")
    f = parse("nccl-tests", text)
    (row,) = f["rows"]
    assert row["time_oop_us"] == 61000000.0 and row["wrong_ip"] == 268435000
    assert (f["wrong"], f["out_of_bounds"], f["completed"]) == (2, 2, True)


def test_nccl_tests_no_data_check_prints_na() -> None:
    # -c 0: "N/A" in the #wrong cells: null, not 0
    f = parse("nccl-tests", HEADER_2_19 + _nccl_2_19_row(1073741824, "%7.0f" % 3801.0, None))
    assert (f["rows"][0]["wrong_oop"], f["rows"][0]["wrong_ip"]) == (None, None)
    assert f["wrong"] is None and f["old_layout"] is False


def test_nccl_tests_report_timestamps() -> None:
    # -S 1: writeTimestamp appends "%21s" of "%Y-%m-%d %H:%M:%S" after the in-place half
    stamp = "%21s" % "2025-11-02 14:03:59"
    f = parse("nccl-tests", HEADER_2_19 + _nccl_2_19_row(1073741824, "%7.0f" % 3801.0, 0, stamp))
    assert f["rows"][0]["busbw_ip_gb_s"] == 283.5 and f["rows"][0]["wrong_ip"] == 0


def test_nccl_tests_per_iteration_columns() -> None:
    # -I 1 (2.19): each half gains "i_min i_max i_p99 i_cv%" after #wrong
    header = ("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %7s  %7s  %7s  %7s  %6s  %6s"
              "  %6s  %7s  %7s  %7s  %7s %*s\n"
              % ("size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong",
                 "i_min", "i_max", "i_p99", "i_cv%", "time", "algbw", "busbw", "#wrong",
                 "i_min", "i_max", "i_p99", "i_cv%", 0, ""))
    head = "%12li  %12li  %8s  %6s  %6s" % (1073741824, 268435456, "float", "sum", "%6i" % -1)
    half = ("  %7s  %6s  %6s  %6g" % ("3801", "282.5", "529.6", 3.0)
            + "  %7s  %7s  %7s  %7s" % ("3790", "3850", "3849", "0.41"))
    f = parse("nccl-tests", header + head + half + half + "\n")
    (row,) = f["rows"]
    assert f["per_iteration"] is True
    assert (row["busbw_oop_gb_s"], row["wrong_oop"], row["busbw_ip_gb_s"], row["wrong_ip"]) == (
        529.6, 3, 529.6, 3)


def test_nccl_tests_rows_without_a_header() -> None:
    # a pasted table without its header: exponent #wrong is still a count, "4e-07" an error
    new = parse("nccl-tests", _nccl_2_19_row(8388608, "%7.1f" % 77.2, 1048576.0))
    assert new["rows"][0]["wrong_oop"] == 1048580 and new["old_layout"] is False
    old = parse("nccl-tests", "%12li  %12li  %6s  %6s" % (8, 2, "float", "sum")
                + "  %7s  %6.2f  %6.2f  %5.0le" % ("22.54", 0, 0, 4e-07) * 2 + "\n")
    assert old["rows"][0]["error_oop"] == 4e-07 and old["rows"][0]["wrong_oop"] is None


def test_nccl_tests_timeout_and_warn_lines_under_mpirun() -> None:
    # "%s: Test timeout (%ds) %s:%d" (common.cu), NCCL WARN lines, Open MPI's tag prefixes
    text = ("[1,0]<stdout>:# nThread 1 nGpus 1 minBytes 8 maxBytes 128 step: 2(factor)\n"
            "[1,1]<stdout>:gpu2:41:77 [1] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB\n"
            "[1,1]<stdout>:gpu2:41:77 [1] NCCL WARN NET/IB : Got async event : port error\n"
            "[1,1]<stdout>:gpu2: Test timeout (300s) common.cu:524\n"
            "[1,1]<stdout>: .. gpu2 pid 41: Test failure common.cu:603\n")
    f = parse("nccl-tests", text)
    assert f["nccl_warns"] == ["NET/IB : Got async event : port error"]
    assert f["test_failures"] == [".. gpu2 pid 41: Test failure common.cu:603"]
    assert f["other_failures"] == ["gpu2: Test timeout (300s) common.cu:524"]
    assert f["completed"] is False and f["rows"] == []


# --- ioping (koct9i/ioping: ioping.c, print_suffix / dump_statistics / json_statistics) ------


def test_ioping_v1_scaled_count_with_si_prefix_and_space() -> None:
    # v0.8+: print_int scales a count over 1000 with an SI prefix after a space
    text = ("--- /mnt/ckpt (xfs /dev/md0 14.6 TiB) ioping statistics ---\n"
            "70.7 k requests completed in 9.97 s, 276.2 MiB read, 7.09 k iops, 27.7 MiB/s\n"
            "generated 70.7 k requests in 10.0 s, 276.2 MiB, 7.07 k iops, 27.6 MiB/s\n"
            "min/avg/max/mdev = 95.1 us / 141.0 us / 2.41 ms / 39.2 us\n")
    f = parse("ioping", text)
    assert (f["requests"], f["requests_generated"], f["iops"]) == (70700, 70700, 7090.0)
    assert (f["avg_us"], f["max_us"], f["total_time_us"]) == (141.0, 2410.0, 9970000.0)


def test_ioping_v1_too_slow_prefix_on_the_generated_line() -> None:
    # v1.0+: requests outside -min-time/-max-time are counted before "generated"
    text = ("--- . (ext4 /dev/sda2 98.3 GiB) ioping statistics ---\n"
            "7 requests completed in 2.41 ms, 28 KiB read, 2.90 k iops, 11.3 MiB/s\n"
            "2 too slow, generated 10 requests in 9.00 s, 40 KiB, 1 iops, 4.44 KiB/s\n"
            "min/avg/max/mdev = 301.2 us / 344.3 us / 402.0 us / 33.0 us\n"
            "4 KiB <<< . (ext4 /dev/sda2 98.3 GiB): request=9 time=1.2 s (too slow)\n")
    f = parse("ioping", text)
    assert (f["requests"], f["requests_generated"], f["too_slow"], f["too_fast"]) == (
        7, 10, 2, None)
    assert f["request_times"] == [{"request": 9, "time_us": 1200000.0, "warmup": False}]


def test_ioping_v0_8_one_decimal_and_long_units() -> None:
    # v0.8/v0.9: "%.1f" after scaling, no "read" part, no generated line; hour-long totals
    text = ("--- /data (ext4 /dev/sdb1) ioping statistics ---\n"
            "3.6 k requests completed in 1.0 hour, 1 iops, 4.0 KiB/s\n"
            "min/avg/max/mdev = 0.9 ms / 1.1 ms / 1.5 s / 0.2 ms\n")
    f = parse("ioping", text)
    assert (f["requests"], f["total_time_us"], f["avg_us"], f["max_us"]) == (
        3600, 3600e6, 1100.0, 1500000.0)


def test_ioping_v0_6_fixed_ms_format() -> None:
    # v0.6/v0.7: "%d requests completed in %.1f ms, %.0f iops, %.1f mb/s" and one unit
    text = ("--- . (ext3 /dev/sda1) ioping statistics ---\n"
            "10 requests completed in 9012.4 ms, 4310 iops, 16.8 mb/s\n"
            "min/avg/max/mdev = 0.1/0.2/0.5/0.1 ms\n")
    f = parse("ioping", text)
    assert (f["requests"], f["iops"], f["avg_us"], f["max_us"]) == (10, 4310.0, 200.0, 500.0)


def test_ioping_batch_mode_v1_nanoseconds() -> None:
    # -B since v1.0: "%lu %.0f %.0f %.0f %lu %.0f %lu %.0f %lu %lu", times in ns
    f = parse("ioping", "9 3010000 2990 12247040 254200 334500 396400 46500 10 9000000000\n")
    assert (f["format"], f["requests"], f["avg_us"], f["max_us"]) == ("batch", 9, 334.5, 396.4)
    assert (f["requests_generated"], f["iops"]) == (10, 2990.0)


def test_ioping_batch_mode_v0_microseconds_last_period_wins() -> None:
    # -B in v0.7-v0.9: 8 fields "%d %.0f ...", times in us; with -p the total comes last
    f = parse("ioping", "5 1500 3333 13653333 200 300 500 100\n"
                        "10 3100 3225 13212903 200 310 600 110\n")
    assert (f["requests"], f["avg_us"], f["max_us"], f["requests_generated"]) == (
        10, 310.0, 600.0, None)


def test_ioping_json_output() -> None:
    # -J (v1.2+): request objects, then the total's "stat" object, times in ns
    text = ('[{\n  "timestamp": 1700000000,\n  "target": {"path": "."},\n'
            '  "io": {"request": 1, "operation": "read", "size": 4096, "time": 78300, '
            '"ignored": true, "notice": "warmup"}\n},{\n  "timestamp": 1700000009,\n'
            '  "stat": {"count": 9, "size": 36864, "time": 3010000, "iops": 2990.0, '
            '"bps": 12247040, "min": 254200, "avg": 334500, "max": 396400, "mdev": 46500},\n'
            '  "load": {"count": 10, "failed": 0, "size": 40960, "time": 9000000000, '
            '"iops": 1.1, "bps": 4551}\n}]\n')
    f = parse("ioping", text)
    assert (f["format"], f["requests"], f["avg_us"], f["max_us"]) == ("json", 9, 334.5, 396.4)
    assert f["requests_generated"] == 10
    assert f["request_times"] == [{"request": 1, "time_us": 78.3, "warmup": True}]


# --- ofed_info (the ofed_info script of MLNX_OFED / DOCA-OFED / OFA OFED; DGX OS docs) --------


def test_ofed_info_header_without_trailing_colon() -> None:
    # DGX OS builds of `ofed_info -s` and /etc/mlnx-release print no colon
    for text, version, dist in (("OFED-internal-4.7-3.2.9\n", "4.7-3.2.9", "OFED-internal"),
                                ("MLNX_OFED_LINUX-23.10-5.1.4.0\n", "23.10-5.1.4.0",
                                 "MLNX_OFED_LINUX")):
        f = parse("ofed-info", text)
        assert (f["ofed_version"], f["distribution"]) == (version, dist)


def test_ofed_info_numeric_only() -> None:
    # `ofed_info -n` (MLNX_OFED 4.x on, DOCA-OFED): the bare version number
    f = parse("ofed-info", "24.01-0.3.3\n")
    assert (f["ofed_version"], f["distribution"]) == ("24.01-0.3.3", None)


def test_ofed_info_community_ofed_1_5_and_dated_builds() -> None:
    # OFA OFED 1.5's first line; an MLNX_OFED build with a date-stamped version
    assert parse("ofed-info", "OFED-1.5.3.2:\n\nlibibverbs:\n")["ofed_version"] == "1.5.3.2"
    f = parse("ofed-info", "MLNX_OFED_LINUX-5.8-2.0.3.0.202305301712:\n")
    assert f["ofed_version"] == "5.8-2.0.3.0.202305301712"


# --- nvidia-smi default table (driver generations R331, R450, R530+, R610) ---------------------

SMI_610 = """\
Sun Jun  7 08:16:57 2026
+-----------------------------------------------------------------------------------------+
| NVIDIA-SMI 610.43.02              KMD Version: 610.43.02     CUDA UMD Version: 13.3     |
+-----------------------------------------+------------------------+----------------------+
| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |
| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |
|                                         |                        |               MIG M. |
|=========================================+========================+======================|
|   0  NVIDIA B200                    On  |   00000000:63:00.0 Off |                    0 |
| N/A   26C    P0            139W / 1000W |       0MiB / 183359MiB |      0%      Default |
|                                         |                        |             Disabled |
+-----------------------------------------+------------------------+----------------------+
"""


def test_nvidia_smi_r610_kmd_and_cuda_umd_header() -> None:
    # R610 renamed "Driver Version" / "CUDA Version" to "KMD Version" / "CUDA UMD Version"
    f = parse("nvidia-smi", SMI_610)
    assert (f["driver_version"], f["cuda_version"], f["smi_version"]) == (
        "610.43.02", "13.3", "610.43.02")
    (gpu,) = f["gpus"]
    assert (gpu["name"], gpu["memory_total_mib"], gpu["power_cap_w"]) == (
        "NVIDIA B200", 183359, 1000.0)


def test_nvidia_smi_r331_table_without_cuda_and_na_cells() -> None:
    # 2014 (R331): no CUDA Version, 4-digit PCI domain, N/A perf/power/utilisation
    text = ("+------------------------------------------------------+\n"
            "| NVIDIA-SMI 331.62     Driver Version: 331.62         |\n"
            "|-------------------------------+----------------------+----------------------+\n"
            "| GPU  Name        Persistence-M| Bus-Id        Disp.A | Volatile Uncorr. ECC |\n"
            "| Fan  Temp  Perf  Pwr:Usage/Cap|         Memory-Usage | GPU-Util  Compute M. |\n"
            "|===============================+======================+======================|\n"
            "|   0  GeForce GTX 680     Off  | 0000:03:00.0     N/A |                  N/A |\n"
            "| 30%   35C  N/A     N/A /  N/A |      9MiB /  4095MiB |     N/A      Default |\n"
            "+-------------------------------+----------------------+----------------------+\n")
    f = parse("nvidia-smi", text)
    assert (f["driver_version"], f["cuda_version"]) == ("331.62", None)
    (gpu,) = f["gpus"]
    assert (gpu["bus_id"], gpu["temperature_c"], gpu["utilization_pct"], gpu["power_draw_w"]) == (
        "0000:03:00.0", 35, None, None)


def test_nvidia_smi_err_cells_of_a_failing_gpu() -> None:
    # a GPU NVML cannot read prints "ERR!" in its cells: null, the row still found
    text = SMI_610.replace("| N/A   26C    P0            139W / 1000W |       0MiB / 183359MiB |"
                           "      0%      Default |",
                           "|ERR!  ERR!  ERR!             ERR! / ERR! |       0MiB / 183359MiB |"
                           "    ERR!      Default |")
    text = text.replace("|                    0 |", "|                 ERR! |")
    (gpu,) = parse("nvidia-smi", text)["gpus"]
    assert (gpu["index"], gpu["temperature_c"], gpu["utilization_pct"]) == (0, None, None)
    assert gpu["ecc_uncorrected"] is None


# --- nvidia-smi -q (NVSMI LOG across drivers) --------------------------------------------------

SMI_Q_610 = """\

==============NVSMI LOG==============

Timestamp                                              : Sun Sep  6 08:21:38 2026
Driver Version                                         : 610.57.04 {deprecated} KMD Version instead]
CUDA Version                                           : 13.3 {deprecated} CUDA UMD Version instead]
KMD Version                                            : 610.57.04
CUDA UMD Version                                       : 13.3

Attached GPUs                                          : 1
GPU 00000000:01:00.0
    Product Name                                       : NVIDIA B200
    Temperature
        GPU Current Temp                               : 79 C
    GPU Power Readings
        Average Power Draw                             : N/A
        Instantaneous Power Draw                       : 612.31 W
        Current Power Limit                            : 1000.00 W
""".format(deprecated="[Deprecated; will be removed in CUDA 14.0. Use")


def test_nvidia_smi_q_r610_versions_and_deprecation_notes() -> None:
    # R610: "KMD Version" / "CUDA UMD Version"; the old labels carry "[Deprecated; ...]"
    f = parse("nvidia-smi-q", SMI_Q_610)
    assert (f["driver_version"], f["cuda_version"]) == ("610.57.04", "13.3")
    old_only = "\n".join(ln for ln in SMI_Q_610.splitlines()
                         if not ln.startswith(("KMD", "CUDA U")))
    f = parse("nvidia-smi-q", old_only)
    assert (f["driver_version"], f["cuda_version"]) == ("610.57.04", "13.3")


def test_nvidia_smi_q_r550_instantaneous_power_draw() -> None:
    # R550 on: "Average Power Draw" (often N/A) and "Instantaneous Power Draw", no "Power Draw"
    (gpu,) = parse("nvidia-smi-q", SMI_Q_610)["gpus"]
    assert (gpu["power_draw_w"], gpu["temperature_c"]) == (612.31, 79)


def test_nvidia_smi_q_r3xx_memory_usage_section() -> None:
    # 2013 drivers: "Memory Usage" in MB and "Power Readings", before FB/BAR1 were split
    text = ("==============NVSMI LOG==============\n\nDriver Version : 320.00\n\n"
            "Attached GPUs : 1\nGPU 0000:00:06.0\n    Product Name : GRID K2\n"
            "    Memory Usage\n        Total : 2047 MB\n        Used : 2014 MB\n"
            "        Free : 33 MB\n    Power Readings\n        Power Draw : 38.21 W\n")
    (gpu,) = parse("nvidia-smi-q", text)["gpus"]
    assert (gpu["memory_total_mib"], gpu["memory_used_mib"], gpu["power_draw_w"]) == (
        2047, 2014, 38.21)
    assert gpu["bus_id"] == "0000:00:06.0"


def test_nvidia_smi_nvlink_all_links_inactive_and_not_supported() -> None:
    # NVML's own line under a GPU instead of "Link n:" lines (R470 on): a GPU whose NVLinks are
    # all down, and a PCIe card without NVLink
    text = ("GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-5269b708-0000-0000-0000-000000000000)\n"
            "\t Link 0: 25 GB/s\n"
            "GPU 2: NVIDIA A100-SXM4-80GB (UUID: GPU-5269b708-0000-0000-0000-000000000002)\n"
            "NVML: Unable to retrieve Nvlink information as all links are inActive\n")
    gpus = parse("nvidia-smi-nvlink", text)["gpus"]
    assert [(g["index"], len(g["links"]), g.get("all_links_inactive")) for g in gpus] == [
        (0, 1, None), (2, 0, True)]
    pcie = parse("nvidia-smi-nvlink", "GPU 0: NVIDIA GeForce RTX 4090 (UUID: GPU-0)\n"
                                      "\t NVML: Unable to retrieve NVLink information: Not "
                                      "Supported\n")["gpus"][0]
    assert (pcie["links"], pcie["all_links_inactive"]) == ([], False)
    assert pcie["nvml_error"] == "Unable to retrieve NVLink information: Not Supported"


# --- ibstat (linux-rdma/rdma-core infiniband-diags/ibstat.c; OFED 1.x infiniband-diags) --------

IBSTAT_PORT = ("CA 'mlx4_0'\n\tCA type: MT4099\n\tNumber of ports: 1\n"
               "\tFirmware version: 2.42.5000\n"
               "\tHardware version: 1\n\tNode GUID: 0x0002c90300a1b2c0\n"
               "\tSystem image GUID: 0x0002c90300a1b2c3\n\tPort 1:\n\t\tState: Active\n"
               "\t\tPhysical state: LinkUp\n\t\tRate: {rate}\n{extra}\t\tBase lid: 12\n"
               "\t\tLMC: 0\n\t\tSM lid: 1\n\t\tCapability mask: 0x02514868\n"
               "\t\tPort GUID: 0x0002c90300a1b2c1\n{layer}")


def test_ibstat_fdr10_rate() -> None:
    # port_dump: "Rate: %d (FDR10)" for FDR10 links (a number and a note, not garbage)
    text = IBSTAT_PORT.format(rate="40 (FDR10)", extra="", layer="\t\tLink layer: InfiniBand\n")
    (port,) = parse("ibstat", text)["cas"][0]["ports"]
    assert (port["rate_gbit_s"], port["rate_note"], port["link_layer"]) == (
        40, "FDR10", "InfiniBand")


def test_ibstat_sdr_rate_and_no_link_layer_line() -> None:
    # "Rate: 2.5" for 1x SDR; infiniband-diags of OFED 1.4 printed no "Link layer" line
    (port,) = parse("ibstat", IBSTAT_PORT.format(rate="2.5", extra="", layer=""))["cas"][0][
        "ports"]
    assert (port["rate_gbit_s"], port["link_layer"], port["sm_lid"]) == (2.5, None, 1)


def test_ibstat_effective_speed_line() -> None:
    # rdma-core 2026: "Effective speed: %g" after Rate (ibv_query_port_speed)
    text = IBSTAT_PORT.format(rate="400", extra="\t\tEffective speed: 425\n",
                              layer="\t\tLink layer: InfiniBand\n")
    (port,) = parse("ibstat", text)["cas"][0]["ports"]
    assert (port["rate_gbit_s"], port["effective_speed_gbit_s"], port["base_lid"]) == (400, 425, 12)


def test_ibstat_one_port_query() -> None:
    # `ibstat mlx5_0 1`: "CA: 'name'" and the port block without the CA's fields
    text = "CA: 'mlx5_0'\nPort 1:\nState: Down\nPhysical state: Disabled\nRate: 10\n"
    (ca,) = parse("ibstat", text)["cas"]
    assert (ca["name"], ca["ports"][0]["state"], ca["ports"][0]["physical_state"]) == (
        "mlx5_0", "Down", "Disabled")


# --- ibv_devinfo (rdma-core libibverbs/examples/devinfo.c) ------------------------------------


def test_ibv_devinfo_list_only() -> None:
    # -l: printf("%d HCA%s found:\n") then "\t<name>" per device
    f = parse("ibv_devinfo", "2 HCAs found:\n\tmlx5_0\n\tmlx5_1\n")
    assert [(d["name"], d["ports"]) for d in f["devices"]] == [("mlx5_0", []), ("mlx5_1", [])]
    assert parse("ibv_devinfo", "1 HCA found:\n\tmlx5_bond_0\n")["devices"][0]["name"] == (
        "mlx5_bond_0")


def test_ibv_devinfo_extended_speed_and_unspecified_link_layer() -> None:
    # active_speed from active_speed_ex ("200.0 Gbps (256)", XDR, rdma-core of Jul 2023); an old
    # kernel's link_layer "Unspecified"; a port without a phys_state line
    text = ("hca_id:\tmlx5_0\n\ttransport:\t\t\tInfiniBand (0)\n\tphys_port_cnt:\t\t\t1\n"
            "\t\tport:\t1\n\t\t\tstate:\t\t\tPORT_ACTIVE (4)\n\t\t\tmax_mtu:\t\t4096 (5)\n"
            "\t\t\tactive_mtu:\t\t4096 (5)\n\t\t\tsm_lid:\t\t\t1\n\t\t\tport_lid:\t\t7\n"
            "\t\t\tport_lmc:\t\t0x00\n\t\t\tlink_layer:\t\tUnspecified\n"
            "\t\t\tactive_width:\t\t4X (2)\n\t\t\tactive_speed:\t\t200.0 Gbps (256)\n")
    (port,) = parse("ibv_devinfo", text)["devices"][0]["ports"]
    assert (port["state"], port["state_code"], port["link_layer"], port["active_speed"]) == (
        "PORT_ACTIVE", 4, "Unspecified", "200.0 Gbps")
    assert (port["active_mtu"], port["phys_state"]) == (4096, None)


# --- PyTorch CUDA OOM (pytorch/pytorch c10/cuda/CUDACachingAllocator.cpp, per release) ---------


def test_cuda_oom_torch_1_4_cached_wording() -> None:
    # torch <= 1.4 printed "R cached" where 1.5-2.0 print "R reserved in total by PyTorch"
    text = ("RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 10.76 GiB total "
            "capacity; 9.61 GiB already allocated; 5.69 MiB free; 81.08 MiB cached)\n")
    f = parse("cuda-oom", text)
    assert (f["gpu"], f["tried_to_allocate_bytes"], f["free_bytes"]) == (
        0, 20 << 20, round(5.69 * (1 << 20)))
    assert f["reserved_by_pytorch_bytes"] == round(81.08 * (1 << 20))
    assert f["total_capacity_bytes"] == round(10.76 * (1 << 30))


# --- kernel log Xid lines (NVIDIA driver's NVRM messages across branches; util-linux dmesg) ----


def test_dmesg_xid_across_driver_branches() -> None:
    # R3xx: "Xid (0000:02:00): 79, ..." without "PCI:"; R4xx: pid=N; R550+: pid='<unknown>',
    # name=<unknown>; each under a different log front end (dmesg, dmesg -T, journalctl -k)
    text = ("[  812.114231] NVRM: Xid (0000:02:00): 79, GPU has fallen off the bus.\n"
            "[Tue Feb 14 18:48:25 2023] NVRM: Xid (PCI:0000:3b:00): 48, pid=2431, "
            "An uncorrectable double bit error (DBE) has been detected on GPU in the "
            "framebuffer at partition 0, subpartition 0.\n"
            "Feb 14 05:03:41 gpu017 kernel: NVRM: Xid (PCI:0000:b1:00): 94, pid='<unknown>', "
            "name=<unknown>, Contained: SM (0x1). RST: No, D-RST: No\n")
    f = parse("dmesg-xid", text)
    assert [(x["pci"], x["code"]) for x in f["xids"]] == [
        ("0000:02:00", 79), ("0000:3b:00", 48), ("0000:b1:00", 94)]
    assert f["xids"][2]["text"].startswith("Contained: SM (0x1)")
    assert f["fallen_off_bus"] is True


# --- ethtool -S (ethtool's do_gstats / netlink stats.c) ----------------------------------------


def test_ethtool_standard_stats_groups() -> None:
    # ethtool 5.13+: `ethtool -S eth2 --groups eth-mac,eth-ctrl` under "Standard stats for eth2:"
    text = ("Standard stats for eth2:\neth-mac-FramesTransmittedOK: 902623288\n"
            "eth-mac-FrameCheckSequenceErrors: 0\neth-ctrl-MACControlFramesReceived: 16\n")
    assert parse("ethtool-S", text)["counters"] == {
        "eth-mac-FramesTransmittedOK": 902623288, "eth-mac-FrameCheckSequenceErrors": 0,
        "eth-ctrl-MACControlFramesReceived": 16}


# --- dd (GNU coreutils dd.c print_xfer_stats, per release) -------------------------------------


def test_dd_coreutils_before_8_24() -> None:
    # before 8.24 the human size had no IEC part: "(1.1 GB) copied"
    f = parse("dd", "1024+0 records in\n1024+0 records out\n"
                    "1073741824 bytes (1.1 GB) copied, 3.15488 s, 340 MB/s\n")
    assert (f["bytes"], f["seconds"], f["bytes_per_s"]) == (1073741824, 3.15488, 340_000_000)


def test_dd_coreutils_small_count_without_human_size() -> None:
    # 8.24+: a count under 1000 bytes prints no "(...)" and "1 byte" in the singular
    f = parse("dd", "1+0 records in\n1+0 records out\n512 bytes copied, 0.000215 s, 2.4 MB/s\n")
    assert (f["bytes"], f["seconds"], f["bytes_per_s"]) == (512, 0.000215, 2_400_000)
    f = parse("dd", "1 byte copied, 0.0001 s, 10.0 kB/s\n")
    assert (f["bytes"], f["bytes_per_s"]) == (1, 10_000)


# --- perfquery (rdma-core infiniband-diags/perfquery.c, libibmad portid2str) ------------------


def test_perfquery_header_with_a_gid_and_detail_blocks() -> None:
    # a port behind a router prints "Lid 10 Gid <gid>"; -E adds "# PortRcvErrorDetails
    # counters: ..." without a CapMask
    text = ("# Port counters: Lid 10 Gid fe80::2:c903:a1:b2c1 port 1 (CapMask: 0x5A00)\n"
            "PortSelect:......................1\nSymbolErrorCounter:..............3\n"
            "# PortRcvErrorDetails counters: Lid 10 port 1\n"
            "PortLocalPhysicalErrors:.........2\nPortMalformedPacketErrors:.......0\n")
    f = parse("perfquery", text)
    assert (f["lid"], f["port"], f["extended"]) == (10, 1, False)
    assert f["counters"] == {"SymbolErrorCounter": 3, "PortLocalPhysicalErrors": 2,
                             "PortMalformedPacketErrors": 0}
    assert [b["kind"] for b in f["blocks"]] == ["Port", "PortRcvErrorDetails"]


def test_perfquery_all_ports_and_dr_path() -> None:
    # -a: port 255 (all ports summed); a directed-route query names no Lid
    f = parse("perfquery", "# Port extended counters: Lid 4 port 255 (CapMask: 0x5A00 "
                           "CapMask2: 0x0000000)\nPortXmitData:....................42\n")
    assert (f["port"], f["extended"], f["counters"]) == (255, True, {"PortXmitData": 42})
    f = parse("perfquery", "# Port counters: DR path slid 0; dlid 0; 0,1 port 1 (CapMask: "
                           "0x1600)\nPortRcvErrors:...................7\n")
    assert (f["lid"], f["port"], f["counters"]) == (None, 1, {"PortRcvErrors": 7})


# --- NCCL_DEBUG=INFO lines (NVIDIA/nccl src/transport/net_ib.cc, init.cc, per release) -------


def test_nccl_debug_2_23_ib_line_with_flags_and_no_using_network() -> None:
    # NCCL 2.23+: "NET/IB : Using [0]mlx5_0:1/IB [RO] [1]mlx5_3:1/RoCE [RO]; OOB eth0:..."
    # and no separate "Using network IB" line in a trimmed log
    text = ("gpu1:41:41 [0] NCCL INFO NCCL version 2.23.4+cuda12.6\n"
            "gpu1:41:77 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [RO] [1]mlx5_3:1/RoCE [RO];"
            " OOB eth0:10.0.0.1<0>\n")
    f = parse("nccl-debug", text)
    assert f["nccl_version"] == "2.23.4" and f["networks"] == ["IB"]


def test_nccl_debug_old_socket_fallback_wording() -> None:
    # NCCL 2.4-2.18 printed "NET/Socket : Using [0]eth0:10.0.0.1<0>" and "Using network Socket"
    text = ("gpu1:41:41 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.1<0>\n"
            "gpu1:41:41 [0] NCCL INFO Using network Socket\n")
    assert parse("nccl-debug", text)["networks"] == ["Socket"]


# --- Slurm (scontrol show job across releases) --------------------------------------------------


def test_scontrol_job_gres_spellings_across_releases() -> None:
    # <=19.05: "Gres=gpu:8"; 20.11-22.05: "TresPerNode=gpu:8"; 23.02+: "TresPerNode=gres/gpu:8"
    base = ("JobId=7 JobName=train\n   UserId=ann(1000) GroupId=ann(1000)\n"
            "   JobState=RUNNING Reason=None Dependency=(null)\n   Partition=gpu\n"
            "   NodeList=gpu[001-002]\n   NumNodes=2 NumCPUs=16 NumTasks=16\n   {gres}\n")
    for line, gres in (("Gres=gpu:8", "gpu:8"), ("TresPerNode=gpu:8", "gpu:8"),
                       ("TresPerNode=gres/gpu:8", "gres/gpu:8")):
        (job,) = parse("scontrol-job", base.format(gres=line))["jobs"]
        assert (job["gres"], job["num_nodes"], job["state"]) == (gres, 2, "RUNNING")


# --- fio --output-format=json (axboe/fio stat.c, per release) ----------------------------------


def test_fio_2x_clat_in_microseconds() -> None:
    # fio 2.x: "clat" in usec with "percentile" keys; fio 3.x moved to "clat_ns"
    text = ('{"fio version": "fio-2.2.10", "jobs": [{"jobname": "randread", '
            '"read": {"iops": 1200.5, "clat": {"min": 10, "max": 900, "mean": 80.1, '
            '"percentile": {"99.000000": 412, "99.900000": 700}}}, '
            '"write": {"iops": 0, "clat": {"percentile": {"99.000000": 0}}}}]}')
    (job,) = parse("fio-json", text)["jobs"]
    assert (job["name"], job["read_iops"], job["read_clat_p99_us"]) == ("randread", 1200.5, 412.0)
