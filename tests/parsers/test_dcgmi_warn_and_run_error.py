"""dcgmi-diag: what DCGM prints as "Fail" but means Warn, run errors, and DCGM's error codes.

Texts from tests/parsers/dcgmi_variants.py (built from dcgmi/Diag.cpp and nvvs of each release).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from probes.parsers import parse

from . import acceptance_variants as av
from . import dcgmi_variants as v

REAL = Path(__file__).resolve().parents[2] / "fixtures" / "real"


def test_4x_table_gpu_without_its_own_error_is_a_warn() -> None:
    # software Fail for GPU 0's error; GPU 1's "GPU1: Fail" is its Warn (no error of its own)
    f = parse("dcgmi-diag", v.DCGM4_TABLE_SOFTWARE_ONE_GPU)
    software = f["tests"][0]
    assert software["status"] == "Fail"
    assert software["gpus"] == {"0": "Fail", "1": "Warn"}
    assert software["messages"] == [v.PERSISTENCE]
    assert f["failed_tests"] == ["software"]


def test_4x_table_warn_test_row_makes_its_gpu_rows_warns() -> None:
    f = parse("dcgmi-diag", v.DCGM4_TABLE_WARN_TEST)
    (test,) = f["tests"]
    assert test["status"] == "Warn" and test["gpus"] == {"0": "Pass", "1": "Warn"}
    assert f["failed_tests"] == []


def test_4x_json_gpu_without_its_own_error_is_a_warn() -> None:
    f = parse("dcgmi-diag", v.DCGM4_JSON_SOFTWARE_ONE_GPU)
    software, memory = f["tests"]
    assert software["status"] == "Fail" and software["gpus"] == {"0": "Fail", "1": "Warn"}
    assert software["messages"] == [v.PERSISTENCE]  # the summary's repeat is not counted twice
    assert software["codes"] == [{"gpu": "0", "code": 29, "severity": 5}]
    assert memory["status"] == "Pass"


def test_4x_json_fail_without_any_error_is_a_warn() -> None:
    # a Warn test: results and summary print "Fail", no warning anywhere
    f = parse("dcgmi-diag", v.DCGM4_JSON_WARN_TEST)
    (test,) = f["tests"]
    assert test["status"] == "Warn" and test["gpus"] == {"0": "Pass", "1": "Warn"}
    assert f["failed_tests"] == []


def test_4x_json_real_failure_keeps_its_gpu_and_codes() -> None:
    f = parse("dcgmi-diag", v.DCGM4_JSON_MEMORY_FAIL)
    (memory,) = f["tests"]
    assert memory["status"] == "Fail" and memory["gpus"] == {"0": "Pass", "1": "Fail"}
    assert memory["codes"] == [{"gpu": "1", "code": 52, "severity": 2}]
    assert f["failed_tests"] == ["memory"]


def test_4x_json_global_error_keeps_every_failed_gpu() -> None:
    # a test-wide error (in the summary, on no entity) may concern every GPU: none is demoted
    f = parse("dcgmi-diag", av.DCGM4_JSON)
    memory = f["tests"][1]
    assert memory["gpus"] == {"0": "Pass", "1": "Fail"}
    assert memory["codes"] == [{"gpu": "1", "code": 10, "severity": 2},
                               {"gpu": None, "code": 99, "severity": 1}]


@pytest.mark.parametrize(
    ("text", "said"),
    [(v.runtime_error(v.ALREADY_RUNNING), "A diag instance is already running"),
     (v.runtime_error(v.TIMED_OUT), "Return: (-11) : Timeout"),
     (v.DCGM33_RUNTIME_ERROR_JSON, "while DCGM is paused")],
    ids=["already-running", "timeout", "paused-3x"],
)
def test_runtime_error_is_a_run_error(text: str, said: str) -> None:
    f = parse("dcgmi-diag", text)
    assert f["tests"] == [] and f["errors"] == [] and f["gpu_ids"] == []
    assert said in f["run_error"]


@pytest.mark.parametrize("text", [v.DCGM33_TABLE_GRAPHICS, v.DCGM33_JSON_GRAPHICS],
                         ids=["table", "json"])
def test_3x_graphics_processes_fail_is_a_warn(text: str) -> None:
    # checkForGraphicsProcesses only ever warns; dcgmi 3.x prints the Warn as "Fail"
    f = parse("dcgmi-diag", text)
    by_name = {t["name"]: t for t in f["tests"]}
    assert by_name["Graphics Processes"]["status"] == "Warn"
    assert all(s == "Warn" for s in by_name["Graphics Processes"]["gpus"].values())
    assert f["failed_tests"] == []


def test_persistence_mode_before_3_2_is_still_a_failure() -> None:
    # 3.1 (and 2.x, whose tables print no version) set NVVS_RESULT_FAIL for it
    assert parse("dcgmi-diag", v.DCGM31_TABLE_PERSISTENCE)["failed_tests"] == ["Persistence Mode"]
    assert parse("dcgmi-diag", av.DCGM24_JSON)["failed_tests"] == ["Persistence Mode",
                                                                   "GPU Memory"]


def test_4x_real_test_failed_on_a_global_error_with_every_gpu_passing() -> None:
    # NVIDIA/DCGM#253 (DCGM 4.4.1, 8x B200 under Slurm): the pcie row's own "Fail", a global
    # "Warning" (no GPU in its name), every GPU row "Pass"; nothing is demoted or invented
    text = (REAL / "dcgmi-diag__r2-dcgm4.4.1-8x-b200-pcie-fail-internal-error-every-gpu-pass-"
                   "slurm.txt").read_text()
    f = parse("dcgmi-diag", text)
    assert (f["dcgm_version"], f["device_ids"]) == ("4.4.1", ["2901"] * 8)
    _, _, pcie = f["tests"]
    assert pcie["status"] == "Fail" and pcie["category"] == "Integration"
    assert pcie["gpus"] == {str(i): "Pass" for i in range(8)}
    assert pcie["messages"] == [
        "There was an internal error during the test: 'Output of child process (11167) couldn't "
        "be parsed: '* Line 1, Column 1   Syntax error: value, object or array expected. '' "
        "Check DCGM and system logs for errors. Reset GPU. Restart DCGM. Rerun diagnostics."]
    assert f["failed_tests"] == ["pcie"] and f["run_error"] is None


def test_4x_real_four_global_warnings_without_a_footer() -> None:
    text = (REAL / "dcgmi-diag__dcgm4.2.3-4x-26b9-pcie-fail-internal-error-every-gpu-pass-no-"
                   "footer-as-published.txt").read_text()
    f = parse("dcgmi-diag", text)
    pcie = f["tests"][2]
    assert len(pcie["messages"]) == 4 and pcie["gpus"] == {str(i): "Pass" for i in range(4)}
    assert pcie["messages"][0] == (
        "There was an internal error during the test: 'A child process (152) exited with "
        "non-zero status 1' Check DCGM and system logs for errors. Reset GPU. Restart DCGM. "
        "Rerun diagnostics.")


@pytest.mark.parametrize("text", [v.DCGM4_TABLE_GLOBAL_ERROR_EVERY_GPU_FAIL,
                                  v.DCGM4_JSON_GLOBAL_ERROR_EVERY_GPU_FAIL], ids=["table", "json"])
def test_4x_every_gpu_failed_by_a_system_error_is_no_gpu_result(text: str) -> None:
    # the plugin failed on an error of no GPU and set every GPU's result to Fail with it: no
    # GPU was measured by that test (Skip), and the test's own Fail stays, on no GPU
    f = parse("dcgmi-diag", text)
    diagnostic, stress = f["tests"]
    assert diagnostic["status"] == "Fail" and diagnostic["gpus"] == {"0": "Skip", "1": "Skip"}
    assert diagnostic["messages"] == [v.INTERNAL]
    assert stress["gpus"] == {"0": "Pass", "1": "Pass"}


def test_4x_every_gpu_failed_by_a_hardware_error_of_no_gpu_is_no_gpu_result() -> None:
    # an error of no entity in a hardware category (NVSwitch) is still no GPU's: the test's Fail
    # stays, no GPU carries it
    f = parse("dcgmi-diag", v.DCGM4_JSON_GLOBAL_HARDWARE_ERROR_EVERY_GPU_FAIL)
    assert f["tests"][0]["gpus"] == {"0": "Skip", "1": "Skip"}
    assert f["failed_tests"] == ["diagnostic"]


@pytest.mark.parametrize("text", [v.DCGM33_JSON_ERROR_OF_NO_GPU, v.DCGM24_JSON_ERROR_OF_NO_GPU],
                         ids=["3.3", "2.4"])
def test_3x_error_copied_to_every_gpu_is_one_error_of_no_gpu(text: str) -> None:
    f = parse("dcgmi-diag", text)
    (test,) = f["tests"]
    assert test["status"] == "Fail" and set(test["gpus"].values()) == {"Skip"}
    assert test["messages"] == [v.THREW]


def test_3x_each_gpu_with_its_own_error_keeps_its_fail() -> None:
    f = parse("dcgmi-diag", v.DCGM33_JSON_EACH_GPU_ITS_OWN)
    assert f["tests"][0]["gpus"] == {"0": "Fail", "1": "Fail"}
