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
