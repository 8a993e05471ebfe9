"""The services/driver components' parser kinds: systemctl-show, nvidia-smi-L,
nvidia-smi-fabric, ldconfig-p, on their real samples (fixtures/real/, SOURCES in the merge
note) and on the formats of other versions. Until the kinds are listed in probes.parsers.KINDS
the modules are called directly.
"""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from probes.parsers import ParseError

REAL = Path(__file__).resolve().parents[2] / "fixtures" / "real"
MODULES = {"systemctl-show": "systemctl_show", "nvidia-smi-L": "nvidia_smi_L",
           "nvidia-smi-fabric": "nvidia_smi_fabric", "ldconfig-p": "ldconfig_p"}
# (our kind, sample kind): outputs the two commands share (NVML's start-up errors are the same
# for nvidia-smi and nvidia-smi -L; a full nvidia-smi -q holds the Fabric blocks).
OVERLAPS = {("nvidia-smi-L", "nvidia-smi"), ("nvidia-smi-fabric", "nvidia-smi-q")}


def parse(kind: str, text: str) -> dict:
    return importlib.import_module(f"probes.parsers.{MODULES[kind]}").parse(text)


def real(name: str) -> str:
    return (REAL / name).read_text(encoding="utf-8")


def samples(kind: str) -> list[Path]:
    return sorted(REAL.glob(f"{kind}__*.txt"))


@pytest.mark.parametrize("kind", sorted(MODULES))
def test_every_kind_has_real_samples_that_parse(kind: str) -> None:
    assert samples(kind)
    for path in samples(kind):
        assert isinstance(parse(kind, path.read_text(encoding="utf-8")), dict)


@pytest.mark.parametrize("kind", sorted(MODULES))
@pytest.mark.parametrize("text", ["", "\n", " \t\n",
                                  "The quick brown fox jumps over the lazy dog.\nNothing.\n"])
def test_empty_or_prose_is_refused(kind: str, text: str) -> None:
    with pytest.raises(ParseError, match=r"^not .* output: "):
        parse(kind, text)


CROSS = [(kind, p) for kind in sorted(MODULES) for p in sorted(REAL.glob("*__*.txt"))
         if p.name.split("__")[0] != kind and (kind, p.name.split("__")[0]) not in OVERLAPS]


@pytest.mark.parametrize(("kind", "path"), CROSS, ids=[f"{k}<-{p.name}" for k, p in CROSS])
def test_other_kinds_samples_are_refused(kind: str, path: Path) -> None:
    with pytest.raises(ParseError, match=r"^not .* output: ") as info:
        parse(kind, path.read_text(encoding="utf-8"))
    assert "\n" not in str(info.value)


# --- systemctl show --------------------------------------------------------------------------

def test_systemctl_full_dump_of_failed_service() -> None:
    unit = parse("systemctl-show",
                 real("systemctl-show__ssh-service-failed-nrestarts-5-full-dump-part.txt"))
    assert unit["error"] is None
    [props] = unit["units"]
    assert props["Result"] == "exit-code" and props["NRestarts"] == "5"
    assert props["TimeoutStartUSec"] == "1min 30s" and "Id" not in props


def test_systemctl_without_systemd_is_an_error_not_units() -> None:
    out = parse("systemctl-show",
                real("systemctl-show__no-systemd-pid1-container-debian12-systemd252.txt"))
    assert out["units"] == [] and out["error"].startswith("System has not been booted")


def test_systemctl_blocks_of_several_units_and_values_with_equals() -> None:
    # several units: one block each, empty line between (systemctl-show.c); values may hold
    # '=' and spaces (Environment=, ExecStart={ path=... })
    text = ("Result=success\nNRestarts=0\nId=a.service\nLoadState=loaded\nActiveState=active\n"
            "Environment=A=1 B=2\n\nId=b.service\nLoadState=not-found\nActiveState=inactive\n")
    units = parse("systemctl-show", text)["units"]
    assert [u["Id"] for u in units] == ["a.service", "b.service"]
    assert units[0]["Environment"] == "A=1 B=2" and "UnitFileState" not in units[1]


# --- nvidia-smi -L ---------------------------------------------------------------------------

def test_smi_L_gpus_and_mig_devices() -> None:
    out = parse("nvidia-smi-L", real("nvidia-smi-L__4x-a100-sxm4-80gb-gpu0-4-mig-1g20gb.txt"))
    assert [g["index"] for g in out["gpus"]] == [0, 1, 2, 3]
    assert out["gpus"][0]["mig_devices"] == 4 and out["gpus"][1]["mig_devices"] == 0
    assert out["gpus"][0]["name"] == "NVIDIA A100-SXM4-80GB" and out["error"] is None
    quadro = parse("nvidia-smi-L", real("nvidia-smi-L__2x-quadro-rtx4000.txt"))["gpus"]
    assert quadro[1]["uuid"] == "GPU-d6de6afc-bdfe-75c4-5273-0544439153fc"


@pytest.mark.parametrize(("name", "kind"), [
    ("nvidia-smi-L__device-handle-not-found-open-module-515.txt", "device-handle"),
    ("nvidia-smi__device-handle-unknown-error-tesla-p4.txt", "device-handle"),
    ("nvidia-smi__nvml-init-driver-library-mismatch-nvml-library-version-570.124.txt",
     "driver-library-mismatch"),
    ("nvidia-smi__failed-couldnt-communicate-with-driver.txt", "driver-not-loaded"),
    ("nvidia-smi__no-devices-were-found-rtx5090-rminitadapter.txt", "no-devices"),
])
def test_smi_L_error_kinds(name: str, kind: str) -> None:
    out = parse("nvidia-smi-L", real(name))
    assert out["gpus"] == [] and out["error_kind"] == kind and out["error"]


def test_smi_L_lost_bus_ids_and_library_version() -> None:
    out = parse("nvidia-smi-L", real("nvidia-smi__device-handle-unknown-error-tesla-p4.txt"))
    assert out["lost_bus_ids"] == ["0000:07:00.0"]
    mismatch = parse("nvidia-smi-L", real(
        "nvidia-smi__nvml-init-driver-library-mismatch-nvml-library-version-570.124.txt"))
    assert mismatch["nvml_library_version"] == "570.124"
    lost = parse("nvidia-smi-L", "Unable to determine the device handle for GPU 0000:02:00.0: "
                 "GPU is lost.  Reboot the system to recover this GPU\n")
    assert lost["error_kind"] == "gpu-lost"


def test_smi_L_refuses_nvlink_status_which_starts_with_gpu_lines() -> None:
    with pytest.raises(ParseError):
        parse("nvidia-smi-L", "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1)\n"
              "\t Link 0: 26.562 GB/s\n")


# --- nvidia-smi -q Fabric --------------------------------------------------------------------

def test_fabric_blocks_of_real_full_reports() -> None:
    # R565 8x H100 SXM: Completed/Success, clique 0, zero cluster UUID (a single baseboard)
    h100 = parse("nvidia-smi-fabric",
                 real("nvidia-smi-q__8x-h100-hbm3-sxm-driver565-tlimit-sram-secded-idle.txt"))
    assert len(h100["gpus"]) == 8 and h100["gpu_lines"] == 8
    assert {(g["state"], g["status"], g["clique_id"]) for g in h100["gpus"]} == \
        {("Completed", "Success", 0)}
    assert h100["gpus"][0]["bus_id"].startswith("0000")
    # R535 A10: only State and Status, N/A (not on an NVSwitch fabric)
    a10 = parse("nvidia-smi-fabric", real("nvidia-smi-q__1x-a10-driver535-remapped-rows-pending"
                                          ".txt"))["gpus"]
    assert a10[0]["state"] is None and a10[0]["clique_id"] is None


def test_fabric_grep_excerpts() -> None:
    gb200 = parse("nvidia-smi-fabric", real(
        "nvidia-smi-fabric__gb200-completed-clique-2-health-unhealthy-grep-c3.txt"))["gpus"]
    assert gb200 == [{"bus_id": None, "state": "Completed", "status": "Success",
                      "clique_id": 2, "cluster_uuid": "dc6e40c4-d722-4357-9ba6-5291dd461278",
                      "health_summary": "Unhealthy", "health_bandwidth": "Full"}]
    stuck = parse("nvidia-smi-fabric", real(
        "nvidia-smi-fabric__in-progress-driver580-health-block-one-gpu.txt"))["gpus"][0]
    assert stuck["state"] == "In Progress" and stuck["status"] is None
    failed = parse("nvidia-smi-fabric", real(
        "nvidia-smi-fabric__completed-insufficient-resources-clique-0-zero-uuid-reindented.txt"))
    assert failed["gpus"][0]["status"] == "Insufficient Resources"


def test_fabric_report_of_a_driver_without_fabric_block() -> None:
    old = ("==============NVSMI LOG==============\n\nAttached GPUs : 1\n"
           "GPU 00000000:01:00.0\n    Product Name : Tesla V100\n")
    assert parse("nvidia-smi-fabric", old) == {"gpus": [], "recovery": [], "gpu_lines": 1}


def test_recovery_action_and_reset_status_of_real_reports() -> None:
    # R565 8x H100: "Reset Required : No" and "GPU Recovery Action : None" on every GPU
    h100 = parse("nvidia-smi-fabric",
                 real("nvidia-smi-q__8x-h100-hbm3-sxm-driver565-tlimit-sram-secded-idle.txt"))
    assert len(h100["recovery"]) == 8
    assert h100["recovery"][0] == {"bus_id": "00000000:18:00.0", "action": "None",
                                   "reset_required": False,
                                   "drain_and_reset_recommended": False}
    # R550 GH200: the reset status block, no recovery action line yet
    gh200 = parse("nvidia-smi-fabric", real(
        "nvidia-smi-q__1x-gh200-480gb-driver550-current-limit-700w-under-requested-default"
        "-900w.txt"))
    assert gh200["recovery"] == [{"bus_id": "00000000:DD:00.0", "action": None,
                                  "reset_required": False,
                                  "drain_and_reset_recommended": False}]
    assert gh200["gpus"][0]["state"] is None  # Fabric N/A: no NVSwitch fabric


def test_recovery_action_of_r570_with_deprecated_reset_flags() -> None:
    # R570 on: the old flags say "Requested functionality has been deprecated" (unknown, not
    # No); the action is what the driver wants done
    text = ("GPU 00000000:1B:00.0\n    GPU Reset Status\n"
            "        Reset Required                    : Requested functionality has been "
            "deprecated\n"
            "        Drain and Reset Recommended       : Requested functionality has been "
            "deprecated\n"
            "    GPU Recovery Action                   : Reset\n"
            "    Fabric\n        State                             : Completed\n")
    parsed = parse("nvidia-smi-fabric", text)
    assert parsed["recovery"] == [{"bus_id": "00000000:1B:00.0", "action": "Reset",
                                   "reset_required": None,
                                   "drain_and_reset_recommended": None}]
    assert parsed["gpus"][0]["state"] == "Completed"
    # a grep of the one line (no GPU line) still names the action
    assert parse("nvidia-smi-fabric", "    GPU Recovery Action : Reboot\n")["recovery"][0][
        "action"] == "Reboot"


# --- ldconfig -p -----------------------------------------------------------------------------

def test_ldconfig_lines_and_versions() -> None:
    out = parse("ldconfig-p", real(
        "ldconfig-p__grep-cuda-ubuntu2404-two-driver-versions-on-disk.txt"))
    names = [lib["name"] for lib in out["libs"]]
    assert "libcuda.so.1" in names and out["cache_count"] is None
    assert all(lib["abi"] == "libc6,x86-64" for lib in out["libs"])
    head = parse("ldconfig-p", real("ldconfig-p__head-debian12-no-nvidia.txt"))
    assert head["cache_count"] == 541 and head["libs"][0]["name"] == "libz3.so.4"


def test_ldconfig_newer_glibc_flags_and_32bit() -> None:
    text = ("\tlibcuda.so.1 (libc6,x86-64, OS ABI: Linux 3.2.0) => /usr/lib64/libcuda.so.1\n"
            "\tlibcuda.so.1 (libc6) => /usr/lib/libcuda.so.1\n"
            "\tlibnccl.so.2 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libnccl.so.2.21.5\n")
    libs = parse("ldconfig-p", text)["libs"]
    assert [lib["abi"] for lib in libs] == ["libc6,x86-64", "libc6", "libc6,x86-64"]
    assert libs[2]["version"] == "2.21.5" and libs[0]["version"] is None
