"""The dcgm-diag stage's verdicts on dcgmi outputs of DCGM 2.x to 4.x (red-team cases).

The probe's own output is built as the node prints it (the idle guard, the GPU list, then the
dcgmi section); parse, figures and check run as the provider runs them. What each case pins:

- a GPU is called failed only where DCGM failed it: DCGM 4.x prints a GPU's Warn as "Fail"
  (dcgmi/Diag.cpp), so a GPU with no error of its own under a failed test, or any GPU of a Warn
  test, is a warning, never ``dcgm-diag-failed``;
- a diagnostic that did not run or finish (JSON ``runtime_error``: another diag running, a
  time-out, DCGM paused) measured nothing: ``dcgm-diag-incomplete``, never a failed GPU;
- a run whose every GPU test was skipped measured nothing either: incomplete, not a pass;
- a test DCGM failed on an error of no GPU (4.x: of no entity; 2.x/3.x: one error nvvs copied
  onto every GPU) ran and failed: ``dcgm-diag-failed`` naming the test and no GPU, with DCGM's
  text and error code.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from probes.accept_dcgm import PROBE
from probes.base import Context
from probes.model import Finding
from tests.parsers import acceptance_variants as av
from tests.parsers import dcgmi_variants as v

REAL = Path(__file__).resolve().parents[2] / "fixtures" / "real"
GPUS = "index, name\n0, NVIDIA H100 80GB HBM3\n1, NVIDIA H100 80GB HBM3\n"


def output(dcgmi: str, rc: int = 0) -> str:
    """The dcgm-diag script's output on an idle, drained node whose dcgmi printed *dcgmi*."""
    return ("=== diag:section idle\nnode gpu001\nverdict idle\noverride 0\n=== diag:rc idle 0\n"
            f"=== diag:section gpus\n{GPUS}=== diag:rc gpus 0\n"
            f"=== diag:section dcgmi\n{dcgmi}\n=== diag:rc dcgmi {rc}\n")


def judge(dcgmi: str, rc: int = 0, **params: Any) -> dict[str, Finding]:
    ctx = Context(params=params)
    facts = PROBE.parse(output(dcgmi, rc))
    assert PROBE.figures is not None
    facts["figures"] = PROBE.figures("gpu001", facts, ctx)
    found = PROBE.check("gpu001", facts, ctx)
    codes = [f.code for f in found]
    assert len(codes) == len(set(codes)), codes
    return {f.code: f for f in found}


# --- a GPU's Warn printed as "Fail" (DCGM 4.x) --------------------------------------------------


@pytest.mark.parametrize("text", [v.DCGM4_TABLE_SOFTWARE_ONE_GPU, v.DCGM4_JSON_SOFTWARE_ONE_GPU],
                         ids=["table", "json"])
def test_only_the_gpu_with_the_error_fails(text: str) -> None:
    # GPU 0's persistence mode failed the software test; GPU 1 only warned (no error of its own)
    found = judge(text)
    assert found["dcgm-diag-failed"].evidence["failed"] == ["software (GPU 0)"]
    assert "Persistence mode for GPU 0 is disabled" in found["dcgm-diag-failed"].message
    assert found["dcgm-diag-warning"].evidence["warned"] == ["software (GPU 1)"]


@pytest.mark.parametrize("text", [v.DCGM4_TABLE_WARN_TEST, v.DCGM4_JSON_WARN_TEST],
                         ids=["table", "json"])
def test_a_warn_test_fails_no_gpu(text: str) -> None:
    found = judge(text)
    assert set(found) == {"dcgm-diag-warning"}
    assert found["dcgm-diag-warning"].evidence["warned"] == ["targeted_power (GPU 1)"]


@pytest.mark.parametrize("text", [v.DCGM33_TABLE_GRAPHICS, v.DCGM33_JSON_GRAPHICS],
                         ids=["table", "json"])
def test_a_display_server_is_a_warning_on_dcgm_3(text: str) -> None:
    # the idle guard lets graphics-only processes (Xorg) through; DCGM 3.x only warns about them
    found = judge(text)
    assert set(found) == {"dcgm-diag-warning"}
    assert found["dcgm-diag-warning"].evidence["warned"][0].startswith("Graphics Processes")


def test_a_real_json_failure_names_the_gpu() -> None:
    found = judge(v.DCGM4_JSON_MEMORY_FAIL)
    assert set(found) == {"dcgm-diag-failed"}
    assert found["dcgm-diag-failed"].evidence["failed"] == ["memory (GPU 1)"]
    assert v.FAULTY in found["dcgm-diag-failed"].message
    # DCGM_FR_FAULTY_MEMORY's severity (dcgm_errors.c: DCGM_ERROR_ISOLATE) says what to do
    assert found["dcgm-diag-failed"].evidence["actions"] == [
        "isolate (DCGM: cannot perform workload, the GPU should be isolated)"]


@pytest.mark.parametrize("text", [v.DCGM4_JSON_SOFTWARE_ONE_GPU, v.DCGM42_JSON_GB10_SOFTWARE],
                         ids=["4.5-summary", "4.2-summary"])
def test_a_configuration_failure_says_so(text: str) -> None:
    # DCGM_FR_PERSISTENCE_MODE is DCGM_ERROR_CONFIG: DCGM fails the software test; the action
    # says it is a setup fix (at -r 1 the software checks are the whole run)
    found = judge(text, level=1)
    assert found["dcgm-diag-failed"].evidence["actions"] == [
        "config (DCGM: this error can be configured; a setup fix, not the GPU)"]
    assert "action: config" in found["dcgm-diag-failed"].message


# --- the diagnostic did not run: not measured, no GPU accused ------------------------------------


@pytest.mark.parametrize(
    "text",
    [v.runtime_error(v.ALREADY_RUNNING), v.runtime_error(v.TIMED_OUT),
     av.DCGM4_RUNTIME_ERROR_JSON, v.DCGM33_RUNTIME_ERROR_JSON],
    ids=["diag-already-running", "dcgmi-timeout", "dcgm-paused-4x", "dcgm-paused-3x"],
)
def test_a_runtime_error_is_incomplete_not_failed(text: str) -> None:
    found = judge(text, rc=1)
    assert set(found) == {"dcgm-diag-incomplete"}
    assert "did not run" in found["dcgm-diag-incomplete"].message


def test_a_busy_gpu_is_incomplete_not_failed() -> None:
    # NVIDIA/go-dcgm#52: GPU 0 failed GPU Memory because CUDA found it "busy or unavailable"
    # (another process holds it, or its compute mode admits no new context): no GPU fault
    found = judge((REAL / "dcgmi-diag__r2-fragment-gpu-memory-fail-gpu-0-cuda-busy-or-"
                           "unavailable-excerpt.txt").read_text())
    assert set(found) == {"dcgm-diag-incomplete"}
    assert found["dcgm-diag-incomplete"].evidence["busy"] == ["GPU Memory (GPU 0)"]
    assert "busy or unavailable" in found["dcgm-diag-incomplete"].message


def test_a_busy_gpu_does_not_hide_a_real_failure() -> None:
    # the thermal-violation failure of GPU 0 (stas00/ml-engineering) stays a failure
    found = judge((REAL / "dcgmi-diag__r2-fragment-gpu-memory-pass-gpus-1-7-fail-gpu-0-thermal-"
                           "violation-excerpt.txt").read_text())
    assert set(found) == {"dcgm-diag-failed"}


@pytest.mark.parametrize("text", [
    # dcgmi/Command.cpp (2.4-4.x) with --host: the connection failed, nothing else is printed
    "Error: unable to establish a connection to the specified host: localhost\n"
    "Error: Unable to connect to host engine. Host engine connection invalid/disconnected.\n",
    # without --host dcgmi diag starts an embedded host engine (StartDiag::
    # DoExecuteConnectionFailure, connection errors silent); when that fails too:
    "Error: Unable to start an embedded host engine. DCGM initialization error.\n",
    "Error: unable to initialize DCGM\n",
], ids=["no-host-engine", "embedded-failed", "init-failed"])
def test_host_engine_down_is_incomplete(text: str) -> None:
    found = judge(text, rc=255)
    assert set(found) == {"dcgm-diag-incomplete"}
    assert text.splitlines()[0] in found["dcgm-diag-incomplete"].message


# --- a test failed with no GPU named: no GPU is accused; the node fails only on an error DCGM
# says to isolate or reset for (dcgm_errors.h severity), else nothing of the hardware was measured


@pytest.mark.parametrize("name", [
    "dcgmi-diag__dcgm4.2.3-4x-26b9-pcie-fail-internal-error-every-gpu-pass-no-footer-as-"
    "published.txt",
    "dcgmi-diag__r2-dcgm4.4.1-8x-b200-pcie-fail-internal-error-every-gpu-pass-slurm.txt",
])
def test_a_test_failed_on_its_own_error_is_incomplete_naming_no_gpu(name: str) -> None:
    # NVIDIA/DCGM#253: pcie "Fail" on an internal error of the test, every GPU row "Pass".
    # dcgmi exits non-zero (Diag::GetFailureResult), but the diagnostic's own error measured no
    # GPU: the node is not passed (incomplete keeps it drained), no GPU is accused, DCGM's words
    found = judge((REAL / name).read_text())
    assert set(found) == {"dcgm-diag-incomplete"}
    incomplete = found["dcgm-diag-incomplete"]
    assert incomplete.evidence["unattributed"] == ["pcie"]
    assert "There was an internal error during the test" in incomplete.message


@pytest.mark.parametrize("text", [v.DCGM4_TABLE_ALL_SKIPPED, v.DCGM3_JSON_ALL_SKIPPED],
                         ids=["4x-table", "3x-json"])
def test_every_gpu_test_skipped_is_incomplete(text: str) -> None:
    found = judge(text)
    assert set(found) == {"dcgm-diag-incomplete"}
    assert "every test was skipped" in found["dcgm-diag-incomplete"].message


def test_a_gpu_skipped_by_every_test_is_incomplete() -> None:
    found = judge(v.DCGM33_TABLE_GPU3_SKIPPED)
    assert set(found) == {"dcgm-diag-incomplete"}
    assert found["dcgm-diag-incomplete"].evidence["skipped_gpus"] == [3]


def test_level_one_counts_the_deployment_checks() -> None:
    # -r 1 runs only the software checks: their Pass is the whole measurement
    assert judge(v.DCGM4_TABLE_ALL_SKIPPED, level=1) == {}


# --- healthy twins --------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["dcgmi-diag__r3-dcgm4.6.1-7x-b300-per-gpu-rows-all-pass.txt",
                                  "dcgmi-diag__r4-old-layout-blacklist-pass-all-pulse-memtest-"
                                  "fair-cluster.txt"])
def test_real_passing_runs_raise_nothing(name: str) -> None:
    assert judge((REAL / name).read_text()) == {}


@pytest.mark.parametrize("text", [v.DCGM4_TABLE_GLOBAL_ERROR_EVERY_GPU_FAIL,
                                  v.DCGM4_JSON_GLOBAL_ERROR_EVERY_GPU_FAIL], ids=["table", "json"])
def test_every_gpu_failed_by_an_internal_error_is_incomplete_not_each_gpu(text: str) -> None:
    # DCGM 4.x: the diagnostic plugin threw (DCGM_FR_INTERNAL, an error of no GPU) and failed
    # every GPU with it: no GPU is accused, and nothing of them was measured
    found = judge(text)
    assert set(found) == {"dcgm-diag-incomplete"}
    assert found["dcgm-diag-incomplete"].evidence["unattributed"] == ["diagnostic"]
    assert "internal error during the test" in found["dcgm-diag-incomplete"].message


def test_the_error_code_of_a_test_failed_on_no_gpu_is_kept() -> None:
    incomplete = judge(v.DCGM4_JSON_GLOBAL_ERROR_EVERY_GPU_FAIL)["dcgm-diag-incomplete"]
    assert incomplete.evidence["codes"] == [44]  # DCGM_FR_INTERNAL
    assert incomplete.evidence["actions"] == ["triage (DCGM: this error should be triaged)"]
    assert "action: triage" in incomplete.message


def test_a_hardware_error_of_no_gpu_fails_the_node_and_accuses_no_gpu() -> None:
    # an NVSwitch error of no GPU: it used to name GPU 0 and GPU 1 (every GPU blamed)
    failed = judge(v.DCGM4_JSON_GLOBAL_HARDWARE_ERROR_EVERY_GPU_FAIL)["dcgm-diag-failed"]
    assert failed.evidence["failed"] == ["diagnostic (the test, no GPU named)"]
    assert failed.evidence["gpus"] == []
    assert "NVSwitch 2" in failed.message


@pytest.mark.parametrize("text", [v.DCGM44_JSON_SUMMARY_ONLY_ERROR, v.DCGM4_TABLE_NOT_RUN_ROWS,
                                  v.DCGM33_JSON_ERROR_OF_NO_GPU, v.DCGM24_JSON_ERROR_OF_NO_GPU],
                         ids=["4.4-json-summary", "4x-table-not-run", "3.3-json-every-gpu",
                              "2.4-json-every-gpu"])
def test_a_failed_test_without_gpu_evidence_accuses_no_gpu_and_passes_nothing(text: str) -> None:
    # internal errors, "No valid GPUs passed to plugin" (no GPU tested at all), nvvs's copy of
    # one error onto every GPU: none says to isolate or reset, none names a GPU of its own
    found = judge(text)
    assert set(found) == {"dcgm-diag-incomplete"}, found
    assert found["dcgm-diag-incomplete"].evidence["unattributed"]


def test_a_gpu_with_its_own_error_fails_and_the_others_are_not_accused() -> None:
    # an error of GPU 0 and one of no GPU: GPU 1 printed "Fail" has no error of its own
    failed = judge(v.DCGM4_JSON_OWN_AND_GLOBAL)["dcgm-diag-failed"]
    assert failed.evidence["gpus"] == [0]
    assert failed.evidence["codes"] == [44, 52]


def test_every_gpu_with_its_own_error_on_dcgm_3_is_named() -> None:
    # twin of the 3.x error of no GPU: each message names its own GPU, so each GPU is accused
    failed = judge(v.DCGM33_JSON_EACH_GPU_ITS_OWN)["dcgm-diag-failed"]
    assert failed.evidence["gpus"] == [0, 1]


# --- a GPU nvidia-smi lists and DCGM never names; MIG ---------------------------------------------


def test_a_gpu_dcgm_reported_nothing_for_is_incomplete() -> None:
    # nvidia-smi lists GPUs 0 and 1; every DCGM result names GPU 0 only: GPU 1 was not tested
    text = v.DCGM4_JSON_ONE_GPU_OF_TWO
    found = judge(text)
    assert set(found) == {"dcgm-diag-incomplete"}
    assert found["dcgm-diag-incomplete"].evidence["untested_gpus"] == [1]


def test_every_listed_gpu_with_a_result_raises_nothing() -> None:
    assert judge(v._doc({"category": "Hardware", "tests": [
        {"name": "memory", "results": [v._gpu(0, "Pass"), v._gpu(1, "Pass")],
         "test_summary": {"status": "Pass"}}]})) == {}


@pytest.mark.parametrize("text", [v.runtime_error(v.MIG_NO_CI), v.MIG_NO_CI_TABLE],
                         ids=["json", "text"])
def test_mig_without_compute_instances_is_not_run_not_failed(text: str) -> None:
    # nvvs NvidiaValidationSuite: "Cannot run diagnostic: MIG is enabled, but no compute
    # instances are configured": a healthy MIG node the diagnostic cannot load
    found = judge(text, rc=1)
    assert set(found) == {"dcgm-diag-incomplete"}
    assert "did not run" in found["dcgm-diag-incomplete"].message


@pytest.mark.parametrize("rc", [124, 137])
def test_a_cut_off_json_document_is_a_run_stopped_not_a_result(rc: int) -> None:
    # dcgmi prints its -j document at the end: half of one is a run stopped mid-way (diag's own
    # time limit, a kill); it used to read "did not run: {"
    text = v.DCGM4_JSON_MEMORY_FAIL
    found = judge(text[: len(text) // 2], rc=rc)
    assert set(found) == {"dcgm-diag-incomplete"}
    assert f"JSON document is cut off (exit status {rc})" in found["dcgm-diag-incomplete"].message


def test_a_software_error_of_no_gpu_is_a_setup_fix_not_a_failed_node() -> None:
    # DCGM 4.x fails the software test on it and exits non-zero (an error of the software
    # category, Diag::GetFailureResult); DCGM_ERROR_CONFIG says it is a setup fix: the node is
    # not passed, and neither it nor a GPU is called failed
    found = judge(v.DCGM4_JSON_SOFTWARE_BAD_ENV, level=1)
    assert set(found) == {"dcgm-diag-incomplete"}
    incomplete = found["dcgm-diag-incomplete"]
    assert incomplete.evidence["unattributed"] == ["software"]
    assert incomplete.evidence["codes"] == [28]
    assert incomplete.evidence["actions"] == [
        "config (DCGM: this error can be configured; a setup fix, not the GPU)"]


def test_a_run_that_could_not_start_keeps_why_it_could_not() -> None:
    # NVIDIA/DCGM#254: the second "Error:" line is DCGM's reason; it used to be dropped
    found = judge(v.CANNOT_LOAD_PLUGINS, rc=226)
    assert set(found) == {"dcgm-diag-incomplete"}
    assert "Cannot load plugins" in found["dcgm-diag-incomplete"].message


def test_a_json_document_without_tests_is_not_called_cut_off() -> None:
    # 3.x -j leaves a system error out (a MIG refusal, nvvs failing): the metadata alone
    text = '{\n   "version" : "3.3.9",\n   "Driver Version Detected" : "550.90.07"\n}\n'
    found = judge(text, rc=0)
    assert set(found) == {"dcgm-diag-incomplete"}
    assert "no test result" in found["dcgm-diag-incomplete"].message


def test_a_3x_deployment_error_accuses_the_gpu_it_names_not_gpu_0() -> None:
    # DCGM 3.3 -j prints "gpu_id": 0 on every Deployment result; it used to fail GPU 0
    failed = judge(v.DCGM33_JSON_DEPLOYMENT_GPU3)["dcgm-diag-failed"]
    assert failed.evidence["failed"] == ["Page Retirement/Row Remap (GPU 3)"]
    assert failed.evidence["gpus"] == [3]
