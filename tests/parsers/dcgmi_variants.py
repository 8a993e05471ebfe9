"""dcgmi diag outputs for the red-team cases, built from DCGM's own print statements.

Each text follows dcgmi/Diag.cpp of the release named (DIAG_DATA rows, DisplayVerboseInfo's
45-character pieces, HelperDisplayGlobalResult / HelperDisplayEntityResults, HelperJsonAddResult,
HelperJsonAddTestSummary, HelperDisplayFailureMessage) and the nvvs code that decides the result
(Software.cpp SetResult, ResultHelpers.cpp GetOverallDiagResult), so each checks the format, not
one machine. The message texts are DCGM's (dcgmlib/dcgm_errors.h DCGM_FR_*_MSG / _NEXT).
"""

from __future__ import annotations

import json
from typing import Any

from .acceptance_variants import (
    DEPLOYMENT,
    FOOTER,
    HEADER,
    INTEGRATION,
    METADATA,
    STRESS,
    row,
    wrapped,
)

# DCGM_FR_PERSISTENCE_MODE (29, DCGM_ERROR_CONFIG) as the software plugin words it in 4.x
# ("<subtest>: <msg> <next steps>"; NVIDIA/NVSentinel#772 shows the same text from DCGM 4).
PERSISTENCE = ("Persistence Mode: Persistence mode for GPU 0 is disabled. Enable persistence mode "
               "by running \"nvidia-smi -i <gpuId> -pm 1 \" as root.")


def _meta(version: str) -> str:
    return (HEADER + METADATA + row("DCGM Version", version)
            + row("Driver Version Detected", "570.124.06")
            + row("GPU Device IDs Detected", "2330, 2330"))


# 4.x table. Software.cpp checkPersistenceMode: addError(DcgmError{gpuId}) for GPU 0 and
# SetResult(software, WARN) for every GPU; the error makes the test Fail (GetOverallDiagResult)
# and the entity rows print each GPU's Warn as "Fail" (HelperDisplayDiagResult, no
# DDR_DISPLAY_WARN). GPU 1 has no error of its own: it is a Warn, not a failed GPU.
DCGM4_TABLE_SOFTWARE_ONE_GPU = (
    "Successfully ran diagnostic for group.\n"
    + _meta("4.2.3")
    + DEPLOYMENT
    + row("software", "Fail")
    + row("", "GPU0: Fail")
    + wrapped("Warning: GPU0", PERSISTENCE)
    + row("", "GPU1: Fail")
    + STRESS
    + row("targeted_stress", "Pass")
    + row("", "GPU0: Pass")
    + row("", "GPU1: Pass")
    + FOOTER
)

# 4.x table: the test row prints "Warn" (DDR_DISPLAY_WARN), its entity rows the same Warn as
# "Fail"; a test is Warn only when it has no error, so no GPU failed.
DCGM4_TABLE_WARN_TEST = (
    "Successfully ran diagnostic for group.\n"
    + _meta("4.4.1")
    + STRESS
    + row("targeted_power", "Warn")
    + row("", "GPU0: Pass")
    + row("", "GPU1: Fail")
    + FOOTER
)


def _gpu(gpu: int, status: str, *warnings: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"entity_group": "GPU", "entity_group_id": 1, "entity_id": gpu,
                           "status": status}
    if warnings:
        out["warnings"] = list(warnings)
    return out


def _warning(text: str, code: int, severity: int, category: int) -> dict[str, Any]:
    return {"error_category": category, "error_id": code, "error_severity": severity,
            "warning": text}


PERSISTENCE_WARNING = _warning(PERSISTENCE, 29, 5, 8)  # CONFIG, SOFTWARE_OTHER
_ENTITIES = [{"entities": [{"device_id": "2330", "entity_id": 0},
                           {"device_id": "2330", "entity_id": 1}],
              "entity_group": "GPU", "entity_group_id": 1}]
_METADATA = {"Driver Version Detected": "570.124.06", "version": "4.2.3"}


def _doc(*categories: dict[str, Any]) -> str:
    return json.dumps({"DCGM Diagnostic": {"test_categories": list(categories)},
                       "entity_groups": _ENTITIES, "metadata": _METADATA}, indent=3)


# 4.x -j of the same software case: every status goes through HelperDisplayDiagResult without
# DDR_DISPLAY_WARN, so GPU 1's Warn and the summary both read "Fail"; only GPU 0 has an error.
DCGM4_JSON_SOFTWARE_ONE_GPU = _doc(
    {"category": "Deployment", "tests": [
        {"name": "software",
         "results": [_gpu(0, "Fail", PERSISTENCE_WARNING), _gpu(1, "Fail")],
         "test_summary": {"status": "Fail", "warnings": [PERSISTENCE_WARNING]}}]},
    {"category": "Hardware", "tests": [
        {"name": "memory", "results": [_gpu(0, "Pass"), _gpu(1, "Pass")],
         "test_summary": {"status": "Pass"}}]},
)

# 4.x -j of a Warn test (no error at all): results and summary print "Fail".
DCGM4_JSON_WARN_TEST = _doc(
    {"category": "Stress", "tests": [
        {"name": "targeted_power", "results": [_gpu(0, "Pass"), _gpu(1, "Fail")],
         "test_summary": {"status": "Fail"}}]},
)

# 4.x -j of a real failure: DCGM_FR_FAULTY_MEMORY (52, DCGM_ERROR_ISOLATE) on GPU 1.
FAULTY = "Found 126 faulty memory elements on GPU 1"
DCGM4_JSON_MEMORY_FAIL = _doc(
    {"category": "Hardware", "tests": [
        {"name": "memory",
         "results": [_gpu(0, "Pass"), _gpu(1, "Fail", _warning(FAULTY, 52, 2, 10))],
         "test_summary": {"status": "Fail", "warnings": [_warning(FAULTY, 52, 2, 10)]}}]},
)

# 4.x -j when the diagnostic could not run (Diag::RunDiagOnce -> HelperDisplayFailureMessage):
# another diag holds the GPUs (DCGM_ST_DIAG_ALREADY_RUNNING, -39), a time-out (DCGM_ST_TIMEOUT,
# -11). dcgmi prints the message, "Return: (N) : errorString" and a newline.
ALREADY_RUNNING = ("Error: Unable to complete diagnostic for group 2147483647. Return: (-39) : A "
                   "diag instance is already running, cannot run a new diag until the current "
                   "one finishes\n")
TIMED_OUT = ("Error: Unable to complete diagnostic for group 2147483647. Return: (-11) : "
             "Timeout\n")


def runtime_error(message: str, version: str = "4.2.3") -> str:
    return json.dumps({"DCGM Diagnostic": {"runtime_error": message, "version": version}},
                      indent=3)


# 3.x -j HelperDisplayFailureMessage: same keys under "DCGM GPU Diagnostic" (NVVS_NAME in 3.x).
DCGM33_RUNTIME_ERROR_JSON = json.dumps(
    {"DCGM GPU Diagnostic": {"runtime_error": "Error: Diagnostic could not be run while DCGM is "
                                              "paused.", "version": "3.3.9"}}, indent=3)

# Every test skipped (4.x table): a -r 3 on GPUs whose plugins do not support them. The software
# checks passed, nothing loaded a GPU.
DCGM4_TABLE_ALL_SKIPPED = (
    "Successfully ran diagnostic for group.\n"
    + _meta("4.2.3")
    + DEPLOYMENT
    + row("software", "Pass")
    + row("", "GPU0: Pass")
    + row("", "GPU1: Pass")
    + STRESS
    + row("targeted_stress", "Skip")
    + row("", "GPU0: Skip")
    + row("", "GPU1: Skip")
    + row("targeted_power", "Skip")
    + row("", "GPU0: Skip")
    + row("", "GPU1: Skip")
    + FOOTER
)

# 3.x (3.3.9) with a display server on GPU 0: checkForGraphicsProcesses sets only WARN, which
# dcgmi 3.x prints as "Fail" (table and -j) and does not count in its exit status.
GRAPHICS = ("NVVS has detected processes with graphics contexts open running on at least one GPU. "
            "This may cause some tests to fail. Stop the graphics processes or run this "
            "diagnostic on a server that is not being used for display purposes.")
DCGM33_TABLE_GRAPHICS = (
    "Successfully ran diagnostic for group.\n"
    + HEADER + METADATA
    + row("DCGM Version", "3.3.9")
    + row("Driver Version Detected", "550.90.07")
    + row("GPU Device IDs Detected", "1db6,1db6")
    + DEPLOYMENT
    + row("Denylist", "Pass")
    + row("Persistence Mode", "Pass")
    + row("Graphics Processes", "Fail")
    + wrapped("Error", GRAPHICS)
    + row("Inforom", "Pass")
    + STRESS
    + row("Targeted Stress", "Pass - All")
    + FOOTER
)
DCGM33_JSON_GRAPHICS = json.dumps({
    "version": "3.3.9", "Driver Version Detected": "550.90.07",
    "DCGM GPU Diagnostic": {"test_categories": [
        {"category": "Deployment", "tests": [
            {"name": "Denylist", "results": [{"status": "Pass"}]},
            {"name": "Graphics Processes", "results": [
                {"gpu_id": 0, "status": "Fail", "warnings": [
                    {"warnings": GRAPHICS, "error_id": 25, "error_category": 8,
                     "error_severity": 6}]}]}]},
        {"category": "Stress", "tests": [
            {"name": "Targeted Stress", "results": [{"gpu_id": "0", "status": "Pass"},
                                                    {"gpu_id": "1", "status": "Pass"}]}]}]},
}, indent=3)

# 3.1 and 2.x: persistence mode off was a FAIL (checkPersistenceMode set NVVS_RESULT_FAIL).
DCGM31_TABLE_PERSISTENCE = (
    HEADER + METADATA
    + row("DCGM Version", "3.1.8")
    + DEPLOYMENT
    + row("Persistence Mode", "Fail")
    + wrapped("Error", "Persistence mode for GPU 0 is disabled. Enable persistence mode by "
              "running \"nvidia-smi -i <gpuId> -pm 1 \" as root.")
    + FOOTER
)

# 3.x: one GPU skipped by every test while the others ran (HelperDisplayGpuResults prints the
# passed and the skipped GPUs on split rows).
DCGM33_TABLE_GPU3_SKIPPED = (
    HEADER + METADATA
    + row("DCGM Version", "3.3.9")
    + DEPLOYMENT
    + row("Denylist", "Pass")
    + INTEGRATION
    + row("PCIe", "Pass - GPUs: 0, 1, 2   ")
    + row("", "Skip - GPU: 3   ")
    + STRESS
    + row("Targeted Stress", "Pass - GPUs: 0, 1, 2   ")
    + row("", "Skip - GPU: 3   ")
    + FOOTER
)

# 3.x -j where every GPU test was skipped (the shape NVIDIA/DCGM#139 shows for a T400 with
# `dcgmi diag -r 3 -j`; NVIDIA/DCGM#55 the same in a 3.0.4 table): nothing loaded a GPU.
DCGM3_JSON_ALL_SKIPPED = json.dumps({"DCGM GPU Diagnostic": {"test_categories": [
    {"category": "Deployment", "tests": [{"name": "Denylist", "results": [{"status": "Pass"}]}]},
    {"category": "Integration", "tests": [
        {"name": "PCIe", "results": [{"gpu_id": "0", "status": "Skip"}]}]},
    {"category": "Hardware", "tests": [
        {"name": "GPU Memory", "results": [{"gpu_id": "0", "status": "Skip"}]},
        {"name": "Diagnostic", "results": [{"gpu_id": "0", "status": "Skip"}]}]},
    {"category": "Stress", "tests": [
        {"name": "Targeted Stress", "results": [{"gpu_id": "0", "status": "Skip"}]}]},
], "version": "3.3.1"}}, indent=3)

# The 4.0-4.4 summary: HelperJsonAddTestSummary puts only the errors of no entity there (4.5
# added includeAllErrors), and "info" lists. Keys, nesting and texts as a DCGM 4.2.3 `dcgmi diag
# -r 1 -j` of a DGX Spark GB10 was published in a public Go test ("copied verbatim"; the
# repository could not be named with the search tools, so it is a variant, not a fixture).
DCGM42_JSON_GB10_SOFTWARE = json.dumps({
    "DCGM Diagnostic": {"test_categories": [{"category": "Deployment", "tests": [{
        "name": "software",
        "results": [{"entity_group": "GPU", "entity_group_id": 1, "entity_id": 0,
                     "status": "Fail", "warnings": [PERSISTENCE_WARNING]}],
        "test_summary": {"info": ["Error getting the SRAM Threshold Count for GPU 0. Status = 0. "
                                  "Value = 9223372036854775794. SRAM Threshold checking was "
                                  "skipped."], "status": "Fail"}}]}]},
    "entity_groups": [{"entities": [{"device_id": "2e12", "entity_id": 0,
                                     "serial_num": "<<<NOT_SUPPORTED>>>"}],
                       "entity_group": "GPU", "entity_group_id": 1}],
    "metadata": {"Driver Version Detected": "580.82.09", "version": "4.2.3"},
}, indent=3)

# 4.x: a plugin that failed on an error of no GPU and then failed every GPU with it (nvvs
# DiagnosticPlugin.cpp: an exception -> DCGM_FR_INTERNAL (44, TRIAGE, INTERNAL_OTHER) of
# GpuIdTag::Unknown, then SetResult(FAIL) for every GPU; memtest_wrapper.cpp the same with
# DCGM_FR_EMPTY_GPU_LIST). dcgmi prints the error as the test's global "Warning" row
# (HelperDisplayGlobalResult) or only in the JSON test_summary (HelperJsonAddTestSummary,
# includeAllErrors), and every GPU "Fail" with no error of its own.
INTERNAL = ("There was an internal error during the test: 'Failed to initialize the CUDA "
            "context'")
DCGM4_TABLE_GLOBAL_ERROR_EVERY_GPU_FAIL = (
    "Successfully ran diagnostic for group.\n"
    + _meta("4.2.3")
    + STRESS
    + row("diagnostic", "Fail")
    + wrapped("Warning", INTERNAL)
    + row("", "GPU0: Fail")
    + row("", "GPU1: Fail")
    + row("targeted_stress", "Pass")
    + row("", "GPU0: Pass")
    + row("", "GPU1: Pass")
    + FOOTER
)
DCGM4_JSON_GLOBAL_ERROR_EVERY_GPU_FAIL = _doc(
    {"category": "Stress", "tests": [
        {"name": "diagnostic", "results": [_gpu(0, "Fail"), _gpu(1, "Fail")],
         "test_summary": {"status": "Fail", "warnings": [_warning(INTERNAL, 44, 4, 16)]}},
        {"name": "targeted_stress", "results": [_gpu(0, "Pass"), _gpu(1, "Pass")],
         "test_summary": {"status": "Pass"}}]},
)
# the same shape with an error of no GPU in a hardware category (NVSwitch, 12): it may concern
# every GPU, so every GPU keeps its Fail
NVSWITCH = "Detected a fatal error on NVSwitch 2; every GPU of the baseboard is affected"
DCGM4_JSON_GLOBAL_HARDWARE_ERROR_EVERY_GPU_FAIL = _doc(
    {"category": "Stress", "tests": [
        {"name": "diagnostic", "results": [_gpu(0, "Fail"), _gpu(1, "Fail")],
         "test_summary": {"status": "Fail", "warnings": [_warning(NVSWITCH, 84, 2, 12)]}}]},
)

# --- a test failed with no GPU named (each from the release's own code) ---------------------

# 4.0-4.4 -j: HelperJsonAddTestSummary puts only the errors of no entity in the summary; the
# GPUs passed (NVIDIA/DCGM#253's shape in JSON). The test failed; no GPU did.
DCGM44_JSON_SUMMARY_ONLY_ERROR = _doc(
    {"category": "Integration", "tests": [
        {"name": "pcie", "results": [_gpu(0, "Pass"), _gpu(1, "Pass")],
         "test_summary": {"status": "Fail", "warnings": [_warning(INTERNAL, 44, 4, 16)]}}]},
)

# 4.x table: memtest's DCGM_FR_EMPTY_GPU_LIST (82, "No valid GPUs passed to plugin", an error of
# GpuIdTag::Unknown) fails the test (GetOverallDiagResult: any error is FAIL), the GPUs it never
# ran on print "Not Run" (HelperDisplayDiagResult, DCGM_DIAG_RESULT_NOT_RUN).
DCGM4_TABLE_NOT_RUN_ROWS = (
    "Successfully ran diagnostic for group.\n"
    + _meta("4.2.3")
    + STRESS
    + row("memtest", "Fail")
    + wrapped("Warning", "No valid GPUs passed to plugin")
    + row("", "GPU0: Not Run")
    + row("", "GPU1: Not Run")
    + FOOTER
)

# 3.3.9 -j: nvvs JsonOutput::Result gives an error of DCGM_DIAG_ALL_GPUS to every GPU, prefixed
# "GPU <id> ", and fails each; PluginLib::RunTest's exception text and code 1 (v3.3.9).
THREW = ("Caught an exception while trying to execute the test: cudaMalloc failed: out of "
         "memory")
DCGM33_JSON_ERROR_OF_NO_GPU = json.dumps({
    "version": "3.3.9", "Driver Version Detected": "550.90.07",
    "DCGM GPU Diagnostic": {"test_categories": [
        {"category": "Integration", "tests": [
            {"name": "PCIe", "results": [
                {"gpu_id": str(g), "status": "Fail", "warnings": [
                    {"warning": f"GPU {g} {THREW}", "error_id": 1, "error_category": 0,
                     "error_severity": 0}]} for g in (0, 1)]}]}]},
}, indent=3)
# 2.4.7 -j: the same, prefixed "GPU <id>" with no space, one string per GPU
DCGM24_JSON_ERROR_OF_NO_GPU = json.dumps({"DCGM GPU Diagnostic": {"test_categories": [
    {"category": "Stress", "tests": [
        {"name": "Targeted Stress", "results": [
            {"gpu_ids": str(g), "status": "Fail", "warnings": f"GPU {g}{THREW}"}
            for g in (0, 1)]}]}]}}, indent=3)
# its twin: each GPU's own error names it, so each GPU failed
DCGM33_JSON_EACH_GPU_ITS_OWN = json.dumps({
    "version": "3.3.9",
    "DCGM GPU Diagnostic": {"test_categories": [
        {"category": "Hardware", "tests": [
            {"name": "GPU Memory", "results": [
                {"gpu_id": str(g), "status": "Fail", "warnings": [
                    {"warning": f"GPU {g} Found 4 faulty memory elements on GPU {g}",
                     "error_id": 52, "error_category": 10, "error_severity": 2}]}
                for g in (0, 1)]}]}]},
}, indent=3)

# 4.5+ -j: an error of GPU 0 and one of no entity; GPU 1 prints "Fail" with no error of its own
_OWN = "Found 126 faulty memory elements on GPU 0"
DCGM4_JSON_OWN_AND_GLOBAL = _doc(
    {"category": "Stress", "tests": [
        {"name": "diagnostic",
         "results": [_gpu(0, "Fail", _warning(_OWN, 52, 2, 10)), _gpu(1, "Fail")],
         "test_summary": {"status": "Fail", "warnings": [_warning(_OWN, 52, 2, 10),
                                                         _warning(INTERNAL, 44, 4, 16)]}}]},
)

# 4.x -j whose every result names GPU 0 while the node has two (nvidia-smi lists 0 and 1)
DCGM4_JSON_ONE_GPU_OF_TWO = _doc(
    {"category": "Hardware", "tests": [
        {"name": "memory", "results": [_gpu(0, "Pass")], "test_summary": {"status": "Pass"}}]},
)

# nvvs NvidiaValidationSuite (4.x) refusing a MIG GPU with no compute instance; dcgmi prints it
# through HelperDisplayFailureMessage ("Error: " + the system error; -j: runtime_error)
MIG_NO_CI = ("Error: Cannot run diagnostic: MIG is enabled, but no compute instances are "
             "configured. CUDA needs to execute on a compute instance if MIG is enabled.")
MIG_NO_CI_TABLE = MIG_NO_CI + "\n"

# 4.x -j: the software plugin finds CUDA_ENABLE_COREDUMP_ON_EXCEPTION in nv-hostengine's
# environment (Software.cpp checkForBadEnvVaribles: an error of GpuIdTag::Unknown,
# DCGM_FR_BAD_CUDA_ENV 28, DCGM_ERROR_CONFIG, SOFTWARE_CUDA 6, then SetResult(WARN)): the test is
# Fail (it has an error), every GPU's Warn prints "Fail", the error is the summary's alone.
BAD_ENV = ("Environment Variables: Found CUDA performance-limiting environment variable "
           "'CUDA_ENABLE_COREDUMP_ON_EXCEPTION'. Please unset this environment variable to "
           "address test failures.")
DCGM4_JSON_SOFTWARE_BAD_ENV = _doc(
    {"category": "Deployment", "tests": [
        {"name": "software", "results": [_gpu(0, "Fail"), _gpu(1, "Fail")],
         "test_summary": {"status": "Fail", "warnings": [_warning(BAD_ENV, 28, 5, 6)]}}]},
)

# DCGM 4.4.1 without its CUDA 12 plugin package, as NVIDIA/DCGM#254 shows it: RunDiagOnce prints
# "Unable to complete diagnostic ..." and, on the next line, the system error saying why.
CANNOT_LOAD_PLUGINS = (
    "Error: Unable to complete diagnostic for entities 0,1,2,3. Return: (-30) : DCGM GPU "
    "Diagnostic returned an error\n"
    "Error: Cannot load plugins. Unable to change to the plugin dir "
    "'/usr/libexec/datacenter-gpu-manager-4/plugins/cuda12/': 'No such file or directory'\n"
)

# 3.3.9 -j of a Deployment error about GPU 3: HelperJsonAddBasicTests prints "gpu_id" from the
# level-one error detail, which FillTestResult never fills in (0): GPU 3 is the one named.
REMAP = "GPU 3 had memory errors and row remappings are pending"
DCGM33_JSON_DEPLOYMENT_GPU3 = json.dumps({
    "version": "3.3.9", "Driver Version Detected": "550.90.07",
    "DCGM GPU Diagnostic": {"test_categories": [
        {"category": "Deployment", "tests": [
            {"name": "Denylist", "results": [{"status": "Pass"}]},
            {"name": "Page Retirement/Row Remap", "results": [
                {"gpu_id": 0, "status": "Fail", "warnings": [
                    {"warnings": REMAP, "error_id": 85, "error_category": 4,
                     "error_severity": 6}]}]}]},
        {"category": "Stress", "tests": [
            {"name": "Targeted Stress", "results": [
                {"gpu_id": str(g), "status": "Pass"} for g in range(4)]}]}]},
}, indent=3)
