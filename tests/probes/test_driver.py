"""The driver component: its script, its facts on real and baseline outputs, what it cannot
measure. Its faults are the catalogue's (tests/probes/test_stack_faults.py)."""

from __future__ import annotations

import subprocess
from typing import Any

import pytest

from probes import driver
from probes.base import Context
from probes.driver_facts import relation, version_key
from probes.parsers import ParseError
from tests.probes.probe_outputs import REAL, baseline
from tests.probes.stack_cases import LIB, edited, maps


@pytest.fixture
def measured(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []

    def record(probe: str, host: str, what: str, why: str) -> str:
        found.append((what, why))
        return what

    monkeypatch.setattr(driver, "not_measured", record)
    return found


def real(name: str) -> str:
    return (REAL / name).read_text(encoding="utf-8")


def test_script_is_posix_sh_and_runs_here() -> None:
    text = driver.command({})
    subprocess.run(["dash", "-n"], input=text, text=True, check=True)
    assert text.startswith('PATH="$PATH:/usr/sbin:/sbin"; export PATH\n')
    done = subprocess.run(["dash"], input=text, text=True, capture_output=True, timeout=30,
                          check=False)
    assert done.returncode == 0
    facts = driver.parse(done.stdout)
    # no NVIDIA driver here: nothing loaded, nothing invented
    assert facts["module_loaded"] is None and facts["nvml_version"] is None
    assert facts["processes"] == [] or all(p["libcuda"] is None for p in facts["processes"])


def test_process_pattern_reaches_the_script() -> None:
    assert "pgrep -f 'my job'" in driver.command({"process_pattern": "my job"})


def test_baseline_facts(measured: list[tuple[str, str]]) -> None:
    facts = driver.parse(baseline("driver"))
    assert (facts["module_loaded"], facts["module_state"], facts["module_open"]) == \
        ("550.90.07", "loaded", False)
    assert facts["module_installed"] == "550.90.07" and facts["installed_matches_loaded"]
    assert facts["module_vermagic_kernel"] == facts["running_kernel"] == "5.15.0-105-generic"
    assert facts["module_matches_kernel"] is True
    assert (facts["nvml_version"], facts["libcuda_version"]) == ("550.90.07", "550.90.07")
    assert facts["nvml_matches_module"] and facts["libcuda_matches_module"]
    assert facts["fm_version"] == "550.90.07" and facts["fm_matches_module"] is True
    assert facts["compat_versions"] == [] and facts["compat_vs_module"] is None
    assert facts["peermem_loaded"] is True and facts["gdrdrv_loaded"] is False
    assert facts["ib_device_count"] == 8 and facts["dmabuf_capable"] is False
    assert facts["pci_gpu_count"] == 8 and facts["smi_gpu_count"] == 8
    assert facts["smi_rc"] == 0 and facts["smi_error"] is None
    launcher, worker = facts["processes"][0], facts["processes"][1]
    assert launcher["pid"] == 48211 and launcher["libcuda"] is None
    assert launcher["libnccl_version"] == "2.21.5" and launcher["libcudart_version"] == \
        "12.4.127"
    assert worker["libcuda_version"] == "550.90.07" and worker["libcuda_vs_module"] == "same"
    assert worker["libcuda_compat"] is False and worker["libcuda_deleted"] is False
    assert len(facts["processes"]) == 9 and facts["missing"] == [] and facts["errors"] == {}
    driver.check("gpu001", facts, Context())
    assert measured == []


def test_versions_compare_as_numbers() -> None:
    assert version_key("550.90.07") == (550, 90, 7)
    assert relation("560.35.03", "550.90.07") == "newer"
    assert relation("550.127.05", "550.90.07") == "newer"  # 127 > 90, not text order
    assert relation("535.129.03", "550.90.07") == "older"
    assert relation(None, "550.90.07") is None and relation("x", "550") is None


def test_real_smi_L_samples_in_the_section() -> None:
    mig = driver.parse(edited("driver", {
        "smi": real("nvidia-smi-L__4x-a100-sxm4-80gb-gpu0-4-mig-1g20gb.txt")}))
    assert mig["smi_gpu_count"] == 4 and mig["smi_error"] is None
    lost = driver.parse(edited("driver", {
        "smi": (real("nvidia-smi-L__device-handle-not-found-open-module-515.txt"), 255)}))
    assert lost["smi_error_kind"] == "device-handle" and lost["smi_gpu_count"] == 0
    assert lost["smi_lost_bus_ids"] == ["0000:01:00.0"]
    mismatch = driver.parse(edited("driver", {"smi": (real(
        "nvidia-smi__nvml-init-driver-library-mismatch-nvml-library-version-570.124.txt"), 18)}))
    assert mismatch["smi_error_kind"] == "driver-library-mismatch"
    assert mismatch["smi_nvml_library_version"] == "570.124"
    assert mismatch["smi_gpu_count"] is None  # NVML did not start: the count is unknown


def test_smi_timeout_and_unknown_message() -> None:
    hung = driver.parse(edited("driver", {"smi": ("", 124)}))
    assert hung["smi_error_kind"] == "timeout" and hung["smi_rc"] == 124
    odd = driver.parse(edited("driver", {"smi": ("Segmentation fault\n", 139)}))
    assert odd["smi_error"] == "Segmentation fault" and odd["smi_error_kind"] == "other"


def test_real_ldconfig_and_fabric_manager_lines() -> None:
    # a real grep of ldconfig -p (two drivers' files on disk; no link targets read)
    facts = driver.parse(edited("driver", {
        "libs": real("ldconfig-p__grep-cuda-ubuntu2404-two-driver-versions-on-disk.txt"),
        "targets": "", "fm": " Fabric Manager version is : 450.102.04\n"}))
    assert [lib["name"] for lib in facts["libcuda_libs"]] == ["libcuda.so.1", "libcuda.so"]
    assert facts["libcuda_version"] is None and facts["libcuda_matches_module"] is None
    assert facts["fm_version"] == "450.102.04" and facts["fm_matches_module"] is False


def test_lsmod_format_and_no_ib() -> None:
    # lsmod's columns (gpud PR #39's real lines) read like /proc/modules' first three
    facts = driver.parse(edited("driver", {
        "modules": "nvidia_peermem         16384  0\n"
                   "ib_core               434176  9 rdma_cm,ib_ipoib,nvidia_peermem\n"
                   "nvidia              56717312  550 nvidia_uvm,nvidia_peermem,nvidia_modeset\n",
        "ib": ""}))
    assert facts["modules_loaded"] == ["ib_core", "nvidia", "nvidia_peermem"]
    assert facts["peermem_loaded"] is True and facts["nvidia_uvm_loaded"] is False
    assert facts["ib_device_count"] == 0


def test_module_not_loaded_and_not_found_for_kernel(measured: list[tuple[str, str]]) -> None:
    facts = driver.parse(edited("driver", {
        "module": ("cat: /proc/driver/nvidia/version: No such file or directory\n", 1),
        "modinfo": "version: modinfo: ERROR: Module nvidia not found.\n"
                   "vermagic: modinfo: ERROR: Module nvidia not found.\n"
                   "filename: modinfo: ERROR: Module nvidia not found.\n"}))
    assert facts["module_loaded"] is None and facts["module_state"] == "not-loaded"
    assert facts["modinfo_error"] == "modinfo: ERROR: Module nvidia not found."
    assert facts["module_installed"] is None and facts["installed_matches_loaded"] is None
    # with no module, no library can be compared with it
    assert facts["nvml_matches_module"] is None
    assert all(p["libcuda_vs_module"] is None for p in facts["processes"])
    driver.check("gpu001", facts, Context())
    assert measured == []  # a fact, not a failure to measure


def test_unreadable_maps_and_deleted_libraries() -> None:
    text = f"--- pid 48230\n--- unreadable\n--- pid 48231\n{LIB}libcuda.so.550.90.07 (deleted)\n"
    facts = driver.parse(edited("driver", {"maps": text}))
    first, second = facts["processes"]
    assert first["readable"] is False and first["libcuda"] is None
    assert second["libcuda_deleted"] is True and second["libcuda_version"] == "550.90.07"


def test_compat_directory_and_process() -> None:
    compat = "/usr/local/cuda-12.6/compat/lib.real/libcuda.so.560.35.03"
    facts = driver.parse(edited("driver", {
        "compat": "/usr/local/cuda-12.6/compat/libcuda.so.1\n"
                  "/usr/local/cuda-12.6/compat/libcuda.so.560.35.03\n",
        "maps": maps(compat)}))
    assert facts["compat_versions"] == ["560.35.03"] and facts["compat_vs_module"] == "newer"
    worker = next(p for p in facts["processes"] if p["pid"] == 48230)
    assert worker["libcuda_compat"] is True and worker["libcuda_vs_module"] == "newer"


def test_missing_tools_are_missing(measured: list[tuple[str, str]]) -> None:
    facts = driver.parse(edited("driver", {"modinfo": None, "libs": None, "targets": None,
                                           "fm": None, "pci": None, "smi": None}))
    assert facts["missing"] == ["modinfo", "libs", "targets", "fm", "pci", "smi"]
    assert facts["pci_gpu_count"] is None and facts["smi_rc"] is None
    assert facts["nvml_matches_module"] is None and facts["fm_matches_module"] is None
    driver.check("gpu001", facts, Context())
    assert {w for w, _ in measured} == {"installed GPU kernel module", "NVML / libcuda libraries",
                                        "GPUs on the PCI bus", "nvidia-smi -L"}


def test_permission_denied_and_garbage() -> None:
    facts = driver.parse(edited("driver", {
        "module": ("cat: /proc/driver/nvidia/version: Permission denied\n", 1),
        "modules": ("no /proc/modules\n", 1), "kernel": "what\nis this\n"}))
    assert facts["errors"]["module"].endswith("Permission denied")
    assert facts["module_state"] is None and "modules" in facts["errors"]
    assert "kernel" in facts["errors"] and facts["peermem_loaded"] is None
    with pytest.raises(ParseError):
        driver.parse("hello\n")


def test_facts_are_plain_values() -> None:
    def plain(value: Any) -> bool:
        if isinstance(value, dict):
            return all(isinstance(k, str) and plain(v) for k, v in value.items())
        if isinstance(value, list):
            return all(plain(v) for v in value)
        return value is None or isinstance(value, str | int | float | bool)

    assert plain(driver.parse(baseline("driver")))


def test_old_fabric_manager_package_matters_only_where_there_is_a_fabric() -> None:
    # an image built for every GPU model left nv-fabricmanager 550.54.15 behind a 550.90.07
    # driver: on an HGX H100 (NVSwitch bridges) it is the fault; on an H100 PCIe node or a
    # GB200 tray nothing runs it (it used to be critical there too); an HGX B200 has its
    # NVSwitches off the host's bus and still needs it
    from probes.faults.apply import judge

    def codes(changes: dict[str, Any]) -> set[str]:
        facts = driver.parse(edited("driver", {"fm": "Fabric Manager version is : 550.54.15\n",
                                               **changes}))
        return {f.code for f in judge("driver", {"gpu001": facts}, {})}

    def smi(name: str, n: int) -> str:
        return "".join(f"GPU {i}: NVIDIA {name} (UUID: GPU-9822ef6a-0719-2b9a-f2e1-"
                       f"2f02c8d1d5c{i})\n" for i in range(n))

    gpus_only = "".join(f"{b}:00.0 0302: 10de:2331 (rev a1)\n" for b in ("19", "3b", "4c", "5d"))
    assert driver.parse(baseline("driver"))["fabric_manager_relevant"] is True
    assert "fabric-manager-version-mismatch" in codes({})
    assert "fabric-manager-version-mismatch" not in codes(
        {"pci": gpus_only, "smi": smi("H100 PCIe", 4)})
    assert "fabric-manager-version-mismatch" not in codes(
        {"pci": gpus_only, "smi": smi("GB200", 4)})
    assert "fabric-manager-version-mismatch" in codes({"pci": gpus_only, "smi": smi("B200", 8)})


def test_modinfo_falls_back_to_the_gpu_operator_driver_root() -> None:
    # NVIDIA/gpu-driver-container installs the module inside its root, bind-mounted at
    # /run/nvidia/driver: the host's modinfo finds nothing, modinfo -b that root does
    text = driver.command({})
    assert "[ -d /run/nvidia/driver/lib/modules ]" in text and "modinfo $b -F" in text
    facts = driver.parse(edited("driver", {
        "modinfo": "root: /run/nvidia/driver\nversion: 550.90.07\n"
                   "vermagic: 5.15.0-105-generic SMP mod_unload modversions \n"
                   "filename: /run/nvidia/driver/lib/modules/5.15.0-105-generic/kernel/drivers/"
                   "video/nvidia.ko\n"}))
    assert facts["module_root"] == "/run/nvidia/driver" and facts["modinfo_error"] is None
    assert facts["installed_matches_loaded"] is True and facts["module_matches_kernel"] is True


def test_weak_updates_module_matches_its_kabi_kernel() -> None:
    # RHEL weak-modules: /lib/modules/<new>/weak-updates/ links the module built for an
    # earlier kernel of the same kABI; its vermagic names the build kernel and it loads
    facts = driver.parse(edited("driver", {
        "kernel": "5.14.0-427.22.1.el9_4.x86_64\n",
        "modinfo": "version: 550.90.07\n"
                   "vermagic: 5.14.0-427.13.1.el9_4.x86_64 SMP preempt mod_unload modversions \n"
                   "filename: /lib/modules/5.14.0-427.22.1.el9_4.x86_64/weak-updates/nvidia/"
                   "nvidia.ko\n"}))
    assert facts["module_weak_update"] is True and facts["module_matches_kernel"] is True
    # the same vermagic outside weak-updates is a module built for another kernel
    facts = driver.parse(edited("driver", {
        "kernel": "5.14.0-427.22.1.el9_4.x86_64\n",
        "modinfo": "version: 550.90.07\n"
                   "vermagic: 5.14.0-427.13.1.el9_4.x86_64 SMP preempt mod_unload modversions \n"
                   "filename: /lib/modules/5.14.0-427.22.1.el9_4.x86_64/extra/nvidia.ko.xz\n"}))
    assert facts["module_weak_update"] is False and facts["module_matches_kernel"] is False


def test_inforom_warning_keeps_the_gpu_list() -> None:
    # nvidia-smi(1): exit 14 "infoROM is corrupted", the warning appended after the listing
    listing = "".join(f"GPU {i}: NVIDIA H100 80GB HBM3 (UUID: GPU-{i}822ef6a-0719-2b9a-f2e1-"
                      "2f02c8d1d5c8)\n" for i in range(8))
    facts = driver.parse(edited("driver", {
        "smi": (listing + "WARNING: infoROM is corrupted at gpu 0000:5D:00.0\n", 14)}))
    assert facts["smi_gpu_count"] == 8 and facts["smi_error"] is None
    assert facts["smi_inforom_corrupted"] == ["0000:5D:00.0"]
    assert facts["smi_inforom_corrupted_count"] == 1
    assert driver.parse(baseline("driver"))["smi_inforom_corrupted_count"] == 0


def test_modinfo_timed_out_is_not_measured(measured: list[tuple[str, str]]) -> None:
    # "timeout 5 modinfo ..." killed prints nothing after the field name: not a missing module
    facts = driver.parse(edited("driver", {"modinfo": "version: \nvermagic: \nfilename: \n"}))
    assert facts["modinfo_error"] is None and facts["module_installed"] is None
    assert facts["module_matches_kernel"] is None
    driver.check("gpu001", facts, Context())
    assert [what for what, _ in measured] == ["installed GPU kernel module"]


def test_gpus_bound_to_vfio_are_a_virtual_machines() -> None:
    # lspci(8) -k: "Kernel driver in use: vfio-pci" under a device assigned to a VM
    assert "lspci -nk -d 10de:" in driver.command({})
    pci = ("05:00.0 0680: 10de:22a3 (rev a1)\n\tKernel driver in use: vfio-pci\n"
           "19:00.0 0302: 10de:2330 (rev a1)\n\tSubsystem: 10de:16c1\n"
           "\tKernel driver in use: vfio-pci\n\tKernel modules: nouveau, nvidia\n"
           "3b:00.0 0302: 10de:2330 (rev a1)\n\tSubsystem: 10de:16c1\n"
           "\tKernel driver in use: nvidia\n\tKernel modules: nouveau, nvidia\n"
           "5d:00.0 0302: 10de:2330 (rev a1)\n\tKernel modules: nouveau, nvidia\n")
    facts = driver.parse(edited("driver", {"pci": pci}))
    # the unbound GPU counts: it is this host's and no driver took it
    assert facts["pci_gpu_count"] == 2 and facts["pci_nvswitch_count"] == 0
    assert facts["pci_passthrough_count"] == 2
