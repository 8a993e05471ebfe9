"""Fault and twin cases of the gpu-services, driver-stack and nvml-cuda families, as edits of
the healthy baseline (fixtures/scenarios/_baseline/{services,driver}.txt).

Each case names the signature it must raise, the component whose sections it replaces (or the
log stream it adds lines to) and, for the fault and for its healthy twin, the new text of each
section (``(text, rc)`` for a failed command, None for a tool that is missing). The tests apply
every case; ``python -m tests.probes.stack_cases DIR`` writes them as the examples files of the
merge note (services-examples.yaml, driver-examples.yaml).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

from tests.probes.probe_outputs import BASELINE, baseline, block, missing

SectionSpec = str | tuple[str, int] | None
BUSES = ("19", "3B", "4C", "5D", "9B", "BB", "CB", "DB")
LIB = "/usr/lib/x86_64-linux-gnu/"
CUDART = "/usr/local/cuda-12.4/targets/x86_64-linux/lib/libcudart.so.12.4.127"


def sections_of(text: str) -> dict[str, SectionSpec]:
    """A script output back into {section: text | (text, rc) | None}, in order."""
    out: dict[str, SectionSpec] = {}
    current: list[str] | None = None
    name = ""
    for line in text.splitlines(keepends=True):
        if m := re.match(r"^=== diag:section (\S+)", line):
            name, current = m.group(1), []
        elif m := re.match(r"^=== diag:rc (\S+) (-?\d+)", line):
            body = "".join(current or [])
            out[name] = body if m.group(2) == "0" else (body, int(m.group(2)))
            current = None
        elif m := re.match(r"^=== diag:missing (\S+)", line):
            out[m.group(1)] = None
        elif current is not None:
            current.append(line)
    return out


def render(sections: dict[str, SectionSpec]) -> str:
    parts = []
    for name, spec in sections.items():
        if spec is None:
            parts.append(missing(name))
        elif isinstance(spec, tuple):
            parts.append(block(name, spec[0], spec[1]))
        else:
            parts.append(block(name, spec))
    return "".join(parts)


def edited(component: str, changes: dict[str, SectionSpec]) -> str:
    """The component's baseline output with *changes* replacing its sections."""
    sections = sections_of(baseline(component))
    unknown = set(changes) - set(sections)
    assert not unknown, f"{component} has no section {sorted(unknown)}"
    sections.update(changes)
    return render(sections)


# --- services sections -----------------------------------------------------------------------

def unit(name: str, load: str = "loaded", active: str = "active", sub: str = "running",
         enabled: str | None = "enabled", since_us: int = 41234567, restarts: int = 0,
         result: str = "success", status: int = 0) -> str:
    lines = [f"Result={result}", f"NRestarts={restarts}", f"ExecMainStatus={status}",
             f"Id={name}.service", f"LoadState={load}", f"ActiveState={active}", f"SubState={sub}"]
    if enabled:
        lines.append(f"UnitFileState={enabled}")
    lines.append(f"ActiveEnterTimestampMonotonic={since_us if active == 'active' else 0}")
    return "\n".join(lines)


def units(**changed: str) -> str:
    """The baseline's units with some replaced (keyword: unit name with '_' for '-')."""
    blocks = sections_of(baseline("services"))["units"]
    assert isinstance(blocks, str)
    out = []
    for text in blocks.strip().split("\n\n"):
        name = re.search(r"^Id=(\S+)\.service$", text, re.M)
        key = name.group(1).replace("-", "_") if name else ""
        out.append(changed.get(key, text))
    return "\n\n".join(out) + "\n"


def procs(**counts: int) -> str:
    base = {"nv-fabricmanage": 1, "nvlsm": 0, "nvidia-persiste": 1, "nv-hostengine": 1,
            "nvidia-imex": 0, "slurmd": 1, "munged": 1}
    names = {"fabricmanager": "nv-fabricmanage", "nvlsm": "nvlsm",
             "persistenced": "nvidia-persiste", "hostengine": "nv-hostengine",
             "imex": "nvidia-imex", "slurmd": "slurmd", "munged": "munged"}
    for key, value in counts.items():
        base[names[key]] = value
    return "".join(f"{n} {c}\n" for n, c in base.items())


def pci(switches: bool = True, gpus: bool = True) -> str:
    text = sections_of(baseline("services"))["pci"]
    assert isinstance(text, str)
    keep = [ln for ln in text.splitlines()
            if (" 0680:" in ln and switches) or (" 0302:" in ln and gpus)]
    return "\n".join(keep) + ("\n" if keep else "")


def fabric(state: str = "Completed", status: str = "Success", odd: dict[int, tuple[str, str]]
           | None = None) -> str:
    out = ""
    for i, bus in enumerate(BUSES):
        st, ss = (odd or {}).get(i, (state, status))
        out += (f"GPU 00000000:{bus}:00.0\n    Fabric\n"
                f"        State                             : {st}\n"
                f"        Status                            : {ss}\n"
                "        CliqueId                          : "
                f"{'0' if st == 'Completed' else 'N/A'}\n"
                "        ClusterUUID                       : "
                f"{'00000000-0000-0000-0000-000000000000' if st == 'Completed' else 'N/A'}\n"
                "        Health\n"
                "            Bandwidth                     : N/A\n")
    return out


def persistence(mode: str) -> str:
    return "index, pci.bus_id, persistence_mode\n" + "".join(
        f"{i}, 00000000:{b}:00.0, {mode}\n" for i, b in enumerate(BUSES))


PCIE_NODE = {"pci": pci(switches=False), "lpf": "", "fabric": fabric("N/A", "N/A")}
DEPRECATED = "Requested functionality has been deprecated"


def recovery(actions: dict[int, str] | None = None, reset: tuple[str, str] = (DEPRECATED,
             DEPRECATED), odd_reset: dict[int, tuple[str, str]] | None = None) -> str:
    """The fabric section with the reset status and recovery action lines the awk keeps (R570
    on: the old flags "deprecated"; ``actions`` None: a driver printing no recovery line)."""
    out = ""
    for i, gpu_block in enumerate(fabric().split("GPU ")[1:]):
        head, rest = gpu_block.split("\n", 1)
        required, drain = (odd_reset or {}).get(i, reset)
        out += (f"GPU {head}\n    GPU Reset Status\n"
                f"        Reset Required                    : {required}\n"
                f"        Drain and Reset Recommended       : {drain}\n")
        if actions is not None:
            out += f"    GPU Recovery Action                   : {actions.get(i, 'None')}\n"
        out += rest
    return out

# --- driver sections -------------------------------------------------------------------------

MODULE_OPEN = ("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.90.07  Release "
               "Build  (dvs-builder@U16-I3-B03-4-3)  Fri May 31 09:28:16 UTC 2024\n"
               "GCC version:  gcc version 11.4.0 (Ubuntu 11.4.0-1ubuntu1~22.04) \n")


def targets(version: str) -> str:
    return (f"/lib/x86_64-linux-gnu/libcuda.so.1 -> {LIB}libcuda.so.{version}\n"
            f"/lib/x86_64-linux-gnu/libnvidia-ml.so.1 -> {LIB}libnvidia-ml.so.{version}\n")


def maps(libcuda_48230: str) -> str:
    out = f"--- pid 48211\n{LIB}libnccl.so.2.21.5\n{CUDART}\n"
    for pid in range(48230, 48238):
        cuda = libcuda_48230 if pid == 48230 else f"{LIB}libcuda.so.550.90.07"
        paths = sorted([cuda, f"{LIB}libnccl.so.2.21.5", f"{LIB}libnvidia-ml.so.550.90.07",
                        CUDART])
        out += f"--- pid {pid}\n" + "".join(p + "\n" for p in paths)
    return out


def modules(peermem: bool = True, ib: bool = True) -> str:
    text = sections_of(baseline("driver"))["modules"]
    assert isinstance(text, str)
    keep = [ln for ln in text.splitlines()
            if (peermem or not ln.startswith("nvidia_peermem"))
            and (ib or not ln.startswith(("mlx5", "ib_")))]
    return "\n".join(keep) + "\n"


NOT_FOUND = "modinfo: ERROR: Module nvidia not found."
SMI_GPUS = sections_of(baseline("driver"))["smi"]
NGC_COMPAT_BANNER = (
    "NOTE: CUDA Forward Compatibility mode ENABLED.\n"
    "  Using CUDA 12.6 driver version 560.35.03 with kernel driver version 550.90.07.\n"
    "  See https://docs.nvidia.com/deploy/cuda-compatibility/ for details.\n")

# --- the cases -------------------------------------------------------------------------------

Case = dict[str, Any]
SERVICES: list[Case] = [
    {"signature": "gpu-recovery-reboot-required",
     "fault": {"fabric": recovery({3: "Reboot"})},
     "twin": {"fabric": recovery({})}},
    {"signature": "gpu-fabric-health-unhealthy",
     "fault": {"fabric": fabric().replace(
         "        Health\n", "        Health\n            Summary                       : "
         "Unhealthy\n", 3).replace("Summary                       : Unhealthy\n",
                                   "Summary                       : Healthy\n", 2)},
     "twin": {"fabric": fabric().replace(
         "        Health\n", "        Health\n            Summary                       : "
         "Healthy\n")}},
    {"signature": "gpu-recovery-reset-required",
     "fault": {"fabric": recovery(None, ("No", "No"), {4: ("Yes", "No")})},
     "twin": {"fabric": recovery({})}},
    {"signature": "fabric-manager-not-installed",
     "fault": {"units": units(nvidia_fabricmanager=unit("nvidia-fabricmanager", "not-found",
                                                        "inactive", "dead", None)),
               "procs": procs(fabricmanager=0)},
     "twin": {**PCIE_NODE,
              "units": units(nvidia_fabricmanager=unit("nvidia-fabricmanager", "not-found",
                                                       "inactive", "dead", None)),
              "procs": procs(fabricmanager=0)}},
    {"signature": "fabric-manager-down",
     "fault": {"units": units(nvidia_fabricmanager=unit(
         "nvidia-fabricmanager", active="failed", sub="failed", result="exit-code", status=1)),
               "procs": procs(fabricmanager=0)},
     "twin": {**PCIE_NODE,
              "units": units(nvidia_fabricmanager=unit(
                  "nvidia-fabricmanager", active="failed", sub="failed", result="exit-code",
                  status=1)),
              "procs": procs(fabricmanager=0)}},
    {"signature": "fabric-manager-crash-loop",
     "fault": {"units": units(nvidia_fabricmanager=unit(
         "nvidia-fabricmanager", active="activating", sub="auto-restart", restarts=672,
         result="exit-code", status=1)),
               "procs": procs(fabricmanager=0)},
     "twin": {"units": units(nvidia_fabricmanager=unit("nvidia-fabricmanager", restarts=1))}},
    {"signature": "fabric-manager-not-enabled",
     "fault": {"units": units(nvidia_fabricmanager=unit("nvidia-fabricmanager",
                                                        enabled="disabled"))},
     "twin": {**PCIE_NODE,
              "units": units(nvidia_fabricmanager=unit("nvidia-fabricmanager",
                                                       enabled="disabled"))}},
    {"signature": "nvlsm-not-running",
     "fault": {"pci": pci(switches=False),
               "lpf": "/sys/class/infiniband/mlx5_8/device/vpd\n"
                      "/sys/class/infiniband/mlx5_10/device/vpd\n",
               "procs": procs(nvlsm=0)},
     "twin": {"lpf": "", "procs": procs(nvlsm=0)}},
    {"signature": "gpu-fabric-registration-incomplete",
     "fault": {"fabric": fabric("In Progress", "N/A")},
     "twin": {"clock": "95.31\n", "fabric": fabric("In Progress", "N/A")}},
    {"signature": "gpu-fabric-registration-failed",
     "fault": {"fabric": fabric(odd={3: ("Completed", "Insufficient Resources")})},
     "twin": {"fabric": fabric()}},
    {"signature": "gpu-persistence-off",
     "fault": {"persistence": persistence("Disabled"),
               "units": units(nvidia_persistenced=unit("nvidia-persistenced",
                                                       active="inactive", sub="dead",
                                                       enabled="disabled")),
               "procs": procs(persistenced=0)},
     "twin": {"persistence": persistence("Disabled")}},
    {"signature": "dcgm-hostengine-down",
     "fault": {"units": units(nvidia_dcgm=unit("nvidia-dcgm", active="failed", sub="failed",
                                               result="exit-code", status=1)),
               "procs": procs(hostengine=0)},
     "twin": {"units": units(nvidia_dcgm=unit("nvidia-dcgm", "not-found", "inactive", "dead",
                                              None)),
              "procs": procs(hostengine=0)}},
    # fault: a node whose IMEX node list names the 18 trays of its NVL72 domain; twin: an HGX
    # H100 whose image enables nvidia-imex everywhere (it failed: no IMEX domain, no node list,
    # ClusterUUID zero), which nothing on that node uses
    {"signature": "imex-down",
     "fault": {"units": units(nvidia_imex=unit("nvidia-imex", active="failed", sub="failed",
                                               result="exit-code", status=1)),
               "imex": "nodes_config /etc/nvidia-imex/nodes_config.cfg 18\n"},
     "twin": {"units": units(nvidia_imex=unit("nvidia-imex", active="failed", sub="failed",
                                              result="exit-code", status=1))}},
    {"signature": "openibd-failed",
     "fault": {"units": units(openibd=unit("openibd", active="failed", sub="failed",
                                           result="exit-code", status=1))},
     "twin": {"units": units(openibd=unit("openibd", sub="exited"))}},
    {"signature": "slurmd-down",
     "fault": {"units": units(slurmd=unit("slurmd", active="failed", sub="failed",
                                          result="exit-code", status=1)),
               "procs": procs(slurmd=0)},
     "twin": {"units": units(slurmd=unit("slurmd", "not-found", "inactive", "dead", None)),
              "procs": procs(slurmd=0)}},
    {"signature": "munge-down",
     "fault": {"units": units(munge=unit("munge", active="failed", sub="failed",
                                         result="exit-code", status=1)),
               "procs": procs(munged=0)},
     "twin": {"units": units(munge=unit("munge", active="inactive", sub="dead",
                                        enabled="disabled")),
              "procs": procs(munged=0)}},
]

DRIVER: list[Case] = [
    {"signature": "driver-upgrade-pending-reboot",
     "fault": {"modinfo": "version: 550.127.05\nvermagic: 5.15.0-105-generic SMP mod_unload "
                          "modversions \nfilename: /lib/modules/5.15.0-105-generic/kernel/"
                          "nvidia-550srv/nvidia.ko\n"},
     "twin": {"modinfo": "version: 550.90.07\nvermagic: 5.15.0-105-generic SMP mod_unload "
                         "modversions \nfilename: /lib/modules/5.15.0-105-generic/updates/dkms/"
                         "nvidia.ko\n"}},
    {"signature": "driver-library-mismatch",
     "fault": {"targets": targets("550.127.05"),
               "smi": ("Failed to initialize NVML: Driver/library version mismatch\n"
                       "NVML library version: 550.127\n", 18)},
     "twin": {"libs": "\tlibnvidia-ml.so.1 (libc6,x86-64) => /lib/x86_64-linux-gnu/"
                      "libnvidia-ml.so.1\n\tlibcuda.so.1 (libc6,x86-64) => /lib/x86_64-linux-"
                      "gnu/libcuda.so.1\n\tlibcuda.so.1 (libc6) => /lib/i386-linux-gnu/"
                      "libcuda.so.1\n",
              "targets": "/lib/i386-linux-gnu/libcuda.so.1 -> /usr/lib/i386-linux-gnu/"
                         "libcuda.so.550.90.07\n" + targets("550.90.07")}},
    {"signature": "driver-module-not-loaded",
     "fault": {"module": ("cat: /proc/driver/nvidia/version: No such file or directory\n", 1),
               "smi": ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA "
                       "driver. Make sure that the latest NVIDIA driver is installed and "
                       "running.\n", 9)},
     "twin": {"module": ("cat: /proc/driver/nvidia/version: No such file or directory\n", 1),
              "smi": None, "pci": "", "maps": ""}},
    {"signature": "driver-module-missing-for-kernel",
     "fault": {"modinfo": "".join(f"{f}: {NOT_FOUND}\n" for f in ("version", "vermagic",
                                                                    "filename"))},
     "twin": {"modinfo": "version: 550.90.07\nvermagic: 5.15.0-105-generic SMP mod_unload "
                         "modversions \nfilename: /lib/modules/5.15.0-105-generic/updates/dkms/"
                         "nvidia.ko\n"}},
    {"signature": "fabric-manager-version-mismatch",
     "fault": {"fm": "Fabric Manager version is : 550.54.15\n"},
     "twin": {"fm": None}},
    {"signature": "peermem-not-loaded",
     "fault": {"modules": modules(peermem=False)},
     "twin": {"modules": modules(peermem=False, ib=False), "ib": ""}},
    {"signature": "process-libcuda-not-host-driver",
     "fault": {"maps": maps(f"{LIB}libcuda.so.535.129.03")},
     "twin": {"maps": maps("/usr/local/cuda-12.6/compat/lib.real/libcuda.so.560.35.03")}},
    {"signature": "process-compat-libcuda-older-than-driver",
     "fault": {"maps": maps("/usr/local/cuda-12.4/compat/lib.real/libcuda.so.550.54.15")},
     "twin": {"maps": maps("/usr/local/cuda-12.6/compat/lib.real/libcuda.so.560.35.03")}},
    {"signature": "process-driver-libs-replaced",
     "fault": {"maps": maps(f"{LIB}libcuda.so.550.90.07 (deleted)")},
     "twin": {"maps": maps(f"{LIB}libcuda.so.550.90.07")}},
    {"signature": "nvidia-smi-no-devices",
     "fault": {"smi": ("No devices were found\n", 6)},
     "twin": {"smi": ("No devices were found\n", 6), "pci": "", "maps": ""}},
    {"signature": "gpu-inforom-corrupted",
     "fault": {"smi": (str(SMI_GPUS) + "WARNING: infoROM is corrupted at gpu 0000:5D:00.0\n", 14)},
     "twin": {"smi": str(SMI_GPUS)}},
    {"signature": "nvidia-smi-gpu-unreachable",
     "fault": {"smi": ("Unable to determine the device handle for gpu 0000:9B:00.0: Unknown "
                       "Error\n", 255)},
     "twin": {"smi": "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-9822ef6a-0719-2b9a-f2e1-"
                     "2f02c8d1d5c8)\n  MIG 3g.40gb     Device  0: (UUID: MIG-0f3c1d2e-5a6b-"
                     "57c8-9d0e-1f2a3b4c5d6e)\n  MIG 3g.40gb     Device  1: (UUID: MIG-1a2b3c4d-"
                     "5e6f-5a7b-8c9d-0e1f2a3b4c5d)\n" + "".join(
                         ln + "\n" for ln in str(SMI_GPUS).splitlines()[1:])}},
]

# Log signatures: lines added to a stream ("job": what the ranks print, read today by the nccl
# probe's log section and the planned logs component; "kernel": the kernel log, read by the gpu
# probe's kernel_log section and the planned kernel component). Kernel lines carry [seconds]
# stamps; the baseline's uptime is 1209631.42 s.
LOGS: list[Case] = [
    {"signature": "nvrm-api-mismatch", "stream": "kernel",
     "fault": "[1209500.118233] NVRM: API mismatch: the client has the version 550.127.05, but\n"
              "               NVRM: this kernel module has the version 550.90.07.  Please\n"
              "               NVRM: make sure that this kernel module and all NVIDIA driver\n"
              "               NVRM: components have the same version.\n",
     "twin": "[   14.812345] NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.90.07  Fri May "
             "31 09:35:42 UTC 2024\n"},
    {"signature": "cuda-system-not-ready", "stream": "job",
     "fault": "/usr/local/lib/python3.10/dist-packages/torch/cuda/__init__.py:80: UserWarning: "
              "CUDA initialization: Unexpected error from cudaGetDeviceCount(). Did you run "
              "some cuda functions before calling NumCudaDevices() that might have already set "
              "an error? Error 802: system not yet initialized (Triggered internally at  "
              "../c10/cuda/CUDAFunctions.cpp:112.)\n",
     "twin": "gpu001:48230:48230 [0] NCCL INFO cudaDriverVersion 12040\n"},
    {"signature": "cuda-driver-too-old", "stream": "job",
     "fault": "RuntimeError: The NVIDIA driver on your system is too old (found version 12040). "
              "Please update your GPU driver by downloading and installing a new version from "
              "the URL: http://www.nvidia.com/Download/index.aspx Alternatively, go to: "
              "https://pytorch.org to install a PyTorch version that has been compiled with "
              "your version of the CUDA driver.\n",
     "twin": "gpu001:48230:48230 [0] NCCL INFO cudaDriverVersion 12040\n"},
    {"signature": "cuda-no-device", "stream": "job",
     "fault": "[rank3]: RuntimeError: CUDA error: no CUDA-capable device is detected\n",
     "twin": "[rank3]: CUDA_VISIBLE_DEVICES=3\n"},
    {"signature": "cuda-devices-busy", "stream": "job",
     "fault": "gpu-1-1: Test CUDA failure common.cu:1304 'CUDA-capable device(s) is/are busy or "
              "unavailable'\n",
     "twin": "gpu001:48230:48437 [0] NCCL INFO ncclCommInitRank comm 0x5581c8a3e2d0 rank 0 "
             "nranks 16 cudaDev 0 nvmlDev 0 busId 19000 commId 0x8d1f6b0c2a7e4f31 - Init "
             "COMPLETE\n"},
    {"signature": "cuda-ecc-uncorrectable", "stream": "job",
     "fault": "[rank5]: RuntimeError: CUDA error: uncorrectable ECC error encountered\n",
     "twin": "[rank5]: torch.cuda.memory_stats(): num_alloc_retries 0\n"},
    {"signature": "cuda-nvlink-uncorrectable", "stream": "job",
     "fault": "[rank2]: RuntimeError: CUDA error: uncorrectable NVLink error detected during "
              "the execution\n",
     "twin": "gpu001:48230:48437 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM\n"},
    {"signature": "cuda-illegal-address", "stream": "job",
     "fault": "[rank0]: RuntimeError: CUDA error: an illegal memory access was encountered\n",
     "twin": "[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. "
             "GPU 0 has a total capacity of 79.11 GiB of which 1.02 GiB is free.\n"},
    {"signature": "cuda-launch-failure", "stream": "job",
     "fault": "[rank6]: RuntimeError: CUDA error: unspecified launch failure\n",
     "twin": "[rank6]: RuntimeError: CUDA error: too many resources requested for launch\n"},
    {"signature": "cuda-compat-driver-mismatch", "stream": "job",
     "fault": "UserWarning: CUDA initialization: Unexpected error from cudaGetDeviceCount(). "
              "Did you run some cuda functions before calling NumCudaDevices() that might have "
              "already set an error? Error 803: system has unsupported display driver / cuda "
              "driver combination (Triggered internally at ../c10/cuda/CUDAFunctions.cpp:108.)\n",
     "twin": NGC_COMPAT_BANNER},
    {"signature": "cuda-compat-unsupported-gpu", "stream": "job",
     "fault": "/opt/conda/lib/python3.11/site-packages/torch/cuda/__init__.py:129: UserWarning: "
              "CUDA initialization: Unexpected error from cudaGetDeviceCount(). Did you run "
              "some cuda functions before calling NumCudaDevices() that might have already set "
              "an error? Error 804: forward compatibility was attempted on non supported HW "
              "(Triggered internally at /pytorch/c10/cuda/CUDAFunctions.cpp:109.)\n",
     "twin": NGC_COMPAT_BANNER},
    {"signature": "cuda-stub-library", "stream": "job",
     "fault": "[rank0]: RuntimeError: CUDA error: CUDA driver is a stub library\n",
     "twin": "[rank0]: LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/nvidia/lib64\n"},
    {"signature": "cuda-libcuda-kernel-version-mismatch", "stream": "job",
     "fault": "2025-01-27 13:52:31.859580: E external/local_xla/xla/stream_executor/cuda/"
              "cuda_diagnostics.cc:262] kernel version 550.120.0 does not match DSO version "
              "560.35.5 -- cannot find working devices in this configuration\n",
     "twin": "2025-01-27 13:52:31.859553: I external/local_xla/xla/stream_executor/cuda/"
             "cuda_diagnostics.cc:168] libcuda reported version is: 550.90.7\n"},
    {"signature": "nvml-driver-library-mismatch-logged", "stream": "job",
     "fault": "Failed to initialize NVML: Driver/library version mismatch\n"
              "NVML library version: 550.127\n",
     "twin": "| NVIDIA-SMI 550.90.07              Driver Version: 550.90.07      CUDA Version: "
             "12.4     |\n"},
    {"signature": "nvml-unknown-error-in-container", "stream": "job",
     "fault": "Failed to initialize NVML: Unknown Error\n",
     "twin": "Failed to initialize NVML: Insufficient Permissions\n"},
]


def _literal(text: str, indent: int) -> str:
    pad = " " * indent
    return "|\n" + "".join(pad + line + "\n" if line else "\n" for line in text.splitlines())


def _spec_yaml(spec: SectionSpec, indent: int) -> str:
    if spec is None:
        return "null  # the tool is missing (=== diag:missing)\n"
    if isinstance(spec, tuple):
        return ("\n" + " " * indent + f"rc: {spec[1]}\n" + " " * indent + "text: "
                + _literal(spec[0], indent + 2))
    if not spec:
        return "''\n"
    return _literal(spec, indent)


def examples_yaml(component: str, cases: list[Case], logs: list[Case]) -> str:
    out = [f"# Fault and twin examples for the {component} component (diag merge note).",
           f"# Each edits fixtures/scenarios/_baseline/{component}.txt: a section's new text",
           "# (a mapping {rc, text} for a command that failed; null for a tool that is missing).",
           "# Log-signature cases instead give lines to add to a stream: job-stream (what the",
           "# ranks print: the nccl probe's log section, or the logs component) or kernel-stream",
           "# (the gpu probe's kernel_log section, or the kernel component).", ""]
    for case in cases:
        out.append(f"- signature: {case['signature']}")
        for side in ("fault", "twin"):
            out.append(f"  {side}:")
            for name, spec in case[side].items():
                out.append((f"    {name}: " + _spec_yaml(spec, 6)).replace(": \n", ":\n")
                           .rstrip("\n"))
    for case in logs:
        out.append(f"- signature: {case['signature']}")
        for side in ("fault", "twin"):
            out.append(f"  {side}:")
            out.append(f"    {case['stream']}-stream: " + _literal(case[side], 6).rstrip("\n"))
    return "\n".join(out) + "\n"


def main(argv: list[str]) -> None:
    target = Path(argv[1]) if len(argv) > 1 else Path(".")
    (target / "services-examples.yaml").write_text(examples_yaml("services", SERVICES, []))
    (target / "driver-examples.yaml").write_text(examples_yaml("driver", DRIVER, LOGS))


if __name__ == "__main__":  # pragma: no cover - writes the merge note's examples
    assert BASELINE.is_dir()
    main(sys.argv)
