"""The services component: its script, its facts on real and baseline outputs, what it cannot
measure. Its faults are the catalogue's (tests/probes/test_stack_faults.py)."""

from __future__ import annotations

import shutil
import subprocess
from typing import Any

import pytest

from probes import services
from probes.base import Context
from probes.parsers import ParseError
from tests.probes.probe_outputs import REAL, baseline
from tests.probes.stack_cases import edited, pci, unit, units


@pytest.fixture
def measured(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """check()'s not-measured findings as (what, why), without the shared code catalogue."""
    found: list[tuple[str, str]] = []

    def record(probe: str, host: str, what: str, why: str) -> str:
        found.append((what, why))
        return what

    monkeypatch.setattr(services, "not_measured", record)
    return found


def test_script_is_posix_sh_and_runs_here() -> None:
    text = services.command({})
    assert shutil.which("dash")
    subprocess.run(["dash", "-n"], input=text, text=True, check=True)
    # no GPUs, NVSwitches or systemd here: every section ends cleanly, in time
    done = subprocess.run(["dash"], input=text, text=True, capture_output=True, timeout=20,
                          check=False)
    assert done.returncode == 0
    facts = services.parse(done.stdout)
    assert facts["nvswitch_count"] in (None, 0) and facts["fabric"] == []


def test_baseline_facts() -> None:
    facts = services.parse(baseline("services"))
    assert facts["nvswitch_count"] == 4 and facts["gpu_pci_count"] == 8
    assert facts["fabric_manager_needed"] is True
    # the NICs' VPD is root-only: not measured, and not needed with NVSwitches on the bus
    assert facts["nvlink_mgmt_ports"] is None and "lpf" in facts["errors"]
    fm = next(u for u in facts["units"] if u["name"] == "nvidia-fabricmanager")
    assert (fm["load"], fm["active"], fm["sub"], fm["enabled"], fm["restarts"]) == \
        ("loaded", "active", "running", "enabled", 0)
    assert fm["active_for_s"] == pytest.approx(1209633.10 - 41.234567, abs=0.2)
    assert facts["unit_active"]["dcgm"] == "inactive"
    assert facts["fabricmanager_running"] is True and facts["persistenced_running"] is True
    assert facts["nvlsm_running"] is False and facts["imex_running"] is False
    assert len(facts["fabric"]) == 8 and facts["fabric_supported"] is True
    assert {g["state"] for g in facts["fabric"]} == {"Completed"}
    assert [g["enabled"] for g in facts["persistence"]] == [True] * 8
    assert facts["persistence_off_count"] == 0 and facts["missing"] == []


def test_baseline_measures_everything(measured: list[tuple[str, str]]) -> None:
    services.check("gpu001", services.parse(baseline("services")), Context())
    assert measured == []


def test_fabric_awk_on_real_nvidia_smi_q() -> None:
    # the section's awk keeps the GPU lines and Fabric blocks of a real 8x H100 report
    awk = services._FABRIC_AWK.removeprefix("awk ")
    real = (REAL / "nvidia-smi-q__8x-h100-hbm3-sxm-driver565-tlimit-sram-secded-idle.txt")
    done = subprocess.run(["sh", "-c", f"awk {awk}"], input=real.read_text(), text=True,
                          capture_output=True, check=True)
    lines = done.stdout.splitlines()
    assert sum(ln.startswith("GPU ") for ln in lines) == 8
    assert sum(ln.strip() == "Fabric" for ln in lines) == 8
    assert not any("Processes" in ln or "Voltage" in ln for ln in lines)
    facts = services.parse(edited("services", {"fabric": done.stdout}))
    assert [g["state"] for g in facts["fabric"]] == ["Completed"] * 8
    # and what the driver wants done to each GPU (R565: reset status and recovery action)
    assert sum("GPU Recovery Action" in ln for ln in lines) == 8
    assert sum(ln.strip().startswith("Reset Required") for ln in lines) == 8
    assert {(g["action"], g["reset_required"]) for g in facts["gpu_recovery"]} == {("None", False)}
    assert len(facts["gpu_recovery"]) == 8


def test_fabric_awk_keeps_the_reset_status_of_a_real_gh200_report() -> None:
    # R550 Grace Hopper: "GPU Reset Status" (No/No) and no recovery action line yet; Fabric N/A
    awk = services._FABRIC_AWK.removeprefix("awk ")
    real = (REAL / "nvidia-smi-q__1x-gh200-480gb-driver550-current-limit-700w-under-requested"
                   "-default-900w.txt")
    done = subprocess.run(["sh", "-c", f"awk {awk}"], input=real.read_text(), text=True,
                          capture_output=True, check=True)
    assert "GSP Firmware" not in done.stdout and "Virtualization" not in done.stdout
    facts = services.parse(edited("services", {"fabric": done.stdout}))
    assert facts["gpu_recovery"] == [{"bus_id": "00000000:DD:00.0", "action": None,
                                      "reset_required": False,
                                      "drain_and_reset_recommended": False}]
    assert facts["fabric"][0]["state"] is None


def test_no_systemd_is_not_measured(measured: list[tuple[str, str]]) -> None:
    # a real systemctl answer from a container without systemd as PID 1
    text = (REAL / "systemctl-show__no-systemd-pid1-container-debian12-systemd252.txt"
            ).read_text()
    facts = services.parse(edited("services", {"units": (text, 1)}))
    assert facts["units"] == [] and "booted with systemd" in facts["errors"]["units"]
    # the processes still say the daemons run
    assert facts["fabricmanager_running"] is True
    services.check("gpu001", facts, Context())
    assert [w for w, _ in measured] == ["systemd unit states"]


def test_missing_tools_are_missing_not_zero(measured: list[tuple[str, str]]) -> None:
    facts = services.parse(edited("services", {"units": None, "procs": None, "pci": None,
                                               "persistence": None, "fabric": None}))
    assert facts["missing"] == ["units", "procs", "pci", "persistence", "fabric"]
    assert facts["nvswitch_count"] is None and facts["fabric_manager_needed"] is None
    assert facts["fabricmanager_running"] is None and facts["persistence_off_count"] is None
    services.check("gpu001", facts, Context())
    assert len(measured) == 5 + 1  # five tools, and the root-only VPD now that lspci is gone


def test_nvidia_smi_failing_is_an_error() -> None:
    facts = services.parse(edited("services", {
        "persistence": ("Failed to initialize NVML: Driver/library version mismatch\n", 18),
        "fabric": ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA "
                   "driver. Make sure that the latest NVIDIA driver is installed and running.\n",
                   9)}))
    assert facts["errors"]["persistence"].startswith("Failed to initialize NVML")
    assert facts["fabric"] == [] and facts["fabric_supported"] is None


def test_garbled_sections_are_errors_not_crashes() -> None:
    facts = services.parse(edited("services", {"units": "\x00\x01 garbage\n",
                                               "persistence": "what,is,this\n1,2\n",
                                               "fabric": "random words\n"}))
    assert set(facts["errors"]) >= {"units", "fabric"}
    with pytest.raises(ParseError):
        services.parse("not the output of this script\n")


def test_pcie_node_without_fabric_manager_is_unusual_but_healthy() -> None:
    # H100 PCIe node, root: no NVSwitch, no management port, no fabric manager unit, no Slurm
    facts = services.parse(edited("services", {
        "pci": pci(switches=False), "lpf": "",
        "units": units(nvidia_fabricmanager=unit("nvidia-fabricmanager", "not-found",
                                                 "inactive", "dead", None),
                       slurmd=unit("slurmd", "not-found", "inactive", "dead", None)),
        "fabric": "GPU 00000000:19:00.0\n    Fabric\n        State : N/A\n        Status : N/A\n",
    }))
    assert facts["fabric_manager_needed"] is False and facts["nvlink_mgmt_ports"] == 0
    assert facts["fabric_supported"] is False and facts["fabric"][0]["state"] is None


def test_blackwell_management_ports() -> None:
    facts = services.parse(edited("services", {
        "pci": pci(switches=False),
        "lpf": "/sys/class/infiniband/mlx5_8/device/vpd\n"
               "grep: /sys/class/infiniband/mlx5_0/device/vpd: Permission denied\n"}))
    assert facts["nvlink_mgmt_ports"] == 1 and facts["fabric_manager_needed"] is True


def test_facts_are_plain_values() -> None:
    def plain(value: Any) -> bool:
        if isinstance(value, dict):
            return all(isinstance(k, str) and plain(v) for k, v in value.items())
        if isinstance(value, list):
            return all(plain(v) for v in value)
        return value is None or isinstance(value, str | int | float | bool)

    assert plain(services.parse(baseline("services")))


def _imex_codes(changes: dict[str, Any]) -> set[str]:
    from probes.faults.apply import judge

    facts = services.parse(edited("services", changes))
    return {f.code for f in judge("services", {"gpu001": facts}, {})}


_IMEX_FAILED = {"units": units(nvidia_imex=unit("nvidia-imex", active="failed", sub="failed",
                                                result="exit-code", status=1))}
_IMEX_EXITED = {"units": units(nvidia_imex=unit("nvidia-imex", active="inactive", sub="dead"))}
_GB200_FABRIC = "".join(
    f"GPU 0000000{d}:01:00.0\n    Fabric\n        State : Completed\n        Status : Success\n"
    "        CliqueId : 32766\n        ClusterUUID : 6f4c3b1a-2d5e-4f70-9a8b-1c2d3e4f5a6b\n"
    for d in ("8", "9"))


def test_imex_node_list_read() -> None:
    facts = services.parse(baseline("services"))
    assert (facts["imex_nodes"], facts["imex_nodes_config"]) == \
        (0, "/etc/nvidia-imex/nodes_config.cfg")
    assert facts["nvlink_domain"] is False  # HGX H100: ClusterUUID of zeros, CliqueId 0
    facts = services.parse(edited("services", {
        "imex": "nodes_config /shared/nvidia-imex/nodes_config_q1.cfg 18\n"}))
    assert (facts["imex_nodes"], facts["imex_nodes_config"]) == \
        (18, "/shared/nvidia-imex/nodes_config_q1.cfg")
    assert services.parse(edited("services", {"fabric": _GB200_FABRIC}))["nvlink_domain"] is True
    facts = services.parse(edited("services", {"imex": "unreadable /etc/nvidia-imex/n.cfg\n"}))
    assert facts["imex_nodes"] is None and "imex" in facts["errors"]


def test_imex_enabled_on_a_node_without_imex_domain_is_healthy() -> None:
    # An image enabling nvidia-imex on every GPU model (linux-system-roles/hpc PR #85): on an
    # HGX H100 (no node list, ClusterUUID zero) it fails or exits at start, and nothing uses it.
    # It used to raise imex-down (error, a standing fault) on every such node.
    assert "imex-down" not in _imex_codes(_IMEX_FAILED)
    assert "imex-down" not in _imex_codes(_IMEX_EXITED)
    # a GB300 tray not yet in a rack: IMEX exited cleanly with an empty node list
    assert "imex-down" not in _imex_codes({
        **_IMEX_EXITED, "fabric": _GB200_FABRIC,
        "imex": "nodes_config /etc/nvidia-imex/nodes_config.cfg 0\n"})


def test_imex_down_in_an_imex_domain() -> None:
    domain = {"imex": "nodes_config /etc/nvidia-imex/nodes_config.cfg 18\n"}
    assert "imex-down" in _imex_codes({**_IMEX_FAILED, **domain})
    assert "imex-down" in _imex_codes({**_IMEX_EXITED, **domain})
    # no node list found, but the GPUs are in a multi-node NVLink cluster and IMEX failed
    assert "imex-down" in _imex_codes({**_IMEX_FAILED, "fabric": _GB200_FABRIC})
    # IMEX run by the DRA driver's compute-domain daemon: the process runs
    assert "imex-down" not in _imex_codes({
        **_IMEX_FAILED, **domain,
        "procs": "nv-fabricmanage 1\nnvlsm 0\nnvidia-persiste 1\nnv-hostengine 1\n"
                 "nvidia-imex 1\nslurmd 1\nmunged 1\n"})


def test_dcgm_unit_failed_while_a_host_engine_runs_is_monitored() -> None:
    # The host's nvidia-dcgm unit failed (its port taken) while the GPU Operator's standalone
    # nv-hostengine runs in a container: the GPUs are monitored, nothing is down.
    failed = units(nvidia_dcgm=unit("nvidia-dcgm", active="failed", sub="failed",
                                    result="exit-code", status=1))
    assert "dcgm-hostengine-down" not in _imex_codes({"units": failed})  # baseline: 1 running
    assert "dcgm-hostengine-down" in _imex_codes({
        "units": failed, "procs": "nv-fabricmanage 1\nnvlsm 0\nnvidia-persiste 1\n"
                                  "nv-hostengine 0\nnvidia-imex 0\nslurmd 1\nmunged 1\n"})


def test_fabric_manager_looping_on_a_node_without_nvswitch_harms_nothing() -> None:
    looping = units(nvidia_fabricmanager=unit("nvidia-fabricmanager", active="activating",
                                              sub="auto-restart", restarts=40))
    assert "fabric-manager-crash-loop" in _imex_codes({"units": looping})
    # an H100 PCIe node (no NVSwitch bridge, no management port): nothing for it to manage
    assert "fabric-manager-crash-loop" not in _imex_codes({
        "units": looping, "pci": pci(switches=False), "lpf": "",
        "fabric": "GPU 00000000:19:00.0\n    Fabric\n        State : N/A\n        Status : N/A\n"})


def test_fabric_manager_between_restarts_on_systemd_254() -> None:
    # systemd v254 (RestartSteps=) adds SubState auto-restart-queued, also ActiveState
    # activating (src/core/service.c): the loop is the same
    queued = units(nvidia_fabricmanager=unit("nvidia-fabricmanager", active="activating",
                                             sub="auto-restart-queued", restarts=41))
    assert "fabric-manager-crash-loop" in _imex_codes({"units": queued})


def test_blackwell_baseboard_named_by_its_gpus_when_the_vpd_is_root_only() -> None:
    rows = "".join(f"{i}, 00000000:{b}:00.0, NVIDIA B200, Enabled\n"
                   for i, b in enumerate(("1B", "43", "52", "61")))
    denied = "grep: /sys/class/infiniband/mlx5_0/device/vpd: Permission denied\n"
    facts = services.parse(edited("services", {
        "pci": pci(switches=False), "lpf": denied,
        "persistence": "index, pci.bus_id, name, persistence_mode\n" + rows}))
    assert facts["nvlink_mgmt_ports"] is None and facts["fabric_manager_needed"] is True
    assert facts["persistence"][0]["name"] == "NVIDIA B200"
    # a GB200 tray's switches are in the switch trays: no fabric manager on it
    facts = services.parse(edited("services", {
        "pci": pci(switches=False), "lpf": denied,
        "persistence": "index, pci.bus_id, name, persistence_mode\n"
                       + rows.replace("NVIDIA B200", "NVIDIA GB200")}))
    assert facts["fabric_manager_needed"] is None
    assert "name" in services.command({})


def test_nvswitches_passed_through_to_a_vm_need_no_fabric_manager_on_the_host() -> None:
    pci = "".join(f"{b} {c}: 10de:{d} (rev a1)\n\tKernel driver in use: vfio-pci\n"
                  for b, c, d in (("05:00.0", "0680", "22a3"), ("19:00.0", "0302", "2330")))
    facts = services.parse(edited("services", {"pci": pci, "lpf": "no vpd\n"}))
    assert facts["nvswitch_count"] == 0 and facts["gpu_pci_count"] == 0
    assert facts["fabric_manager_needed"] is False
    assert "lspci -nk -d 10de:" in services.command({})
