"""driver: the layers of the NVIDIA driver stack, read against each other.

An evidence-sweep component. The kernel module that is loaded, the module on disk for the
running kernel, the user-space NVML and CUDA driver libraries the loader finds, the CUDA
forward-compatibility libraries, the fabric manager and the peer-memory modules must agree:
an upgrade without a reboot leaves the loaded module older than the libraries ("Failed to
initialize NVML: Driver/library version mismatch"), a kernel update without a DKMS rebuild
leaves no module for the running kernel, a fabric manager of another version refuses to start,
and a training process may map a libcuda that is not the host driver's (a container image that
bundles one, a compat package older than the driver, files replaced under a running job).

Sections (every command bounded, all read-only):
- module:     /proc/driver/nvidia/version (the loaded module);
- kernel:     uname -r;
- modinfo:    version, vermagic and file of the nvidia module modprobe would load (under
              /run/nvidia/driver when the GPU Operator's driver container installed it);
- libs:       ``ldconfig -p`` lines of libnvidia-ml and libcuda;  targets: the files their
              ``.so.1`` links resolve to (the version is in the file name);
- compat:     /usr/local/cuda*/compat/libcuda.so.* (the CUDA forward-compatibility package);
- fm:         ``nv-fabricmanager --version``;
- modules:    the driver, peer-memory (nvidia_peermem, nv_peer_mem, gdrdrv) and IB modules
              loaded (/proc/modules);
- ib:         the RDMA devices (/sys/class/infiniband);
- pci:        the NVIDIA GPUs on the PCI bus and the driver each is bound to
              (lspci -nk -d 10de:; one bound to vfio-pci is a virtual machine's, not this host's);
- smi:        ``nvidia-smi -L`` and its exit status (its error text names the fault);
- maps:       for each training process, the CUDA/NVML/NCCL libraries it really mapped.

Facts are read in probes/driver_facts.py; findings come from the fault catalogue
(probes/faults/driver-stack.yaml, nvml-cuda.yaml); the check says only what was not measured.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from probes.base import Context, Probe, guard_parse, not_measured, script
from probes.driver_facts import parse_output
from probes.model import Finding
from probes.nccl import training_pids_sh

NAME = "driver"

_MAPS_ERE = r"(libcuda\.so|libnvidia-ml\.so|libnccl\.so|libcudart\.so)"
_LIBS_ERE = r"(libnvidia-ml|libcuda)\.so"
# modinfo, ldconfig and lsmod live in /sbin on many distributions, which a non-root SSH
# session's PATH may lack.
_PATH = 'PATH="$PATH:/usr/sbin:/sbin"; export PATH\n'


# The GPU Operator's driver container installs the module inside its own root, which it
# bind-mounts at /run/nvidia/driver (NVIDIA/gpu-driver-container, nvidia-driver _mount_rootfs):
# the host's /lib/modules has no nvidia module there, so modinfo reads that root (-b) instead.
_MODINFO = ("b=''; if ! timeout 5 modinfo -F version nvidia >/dev/null 2>&1 && "
            "[ -d /run/nvidia/driver/lib/modules ]; then b='-b /run/nvidia/driver'; "
            "echo 'root: /run/nvidia/driver'; fi; for f in version vermagic filename; do "
            "echo \"$f: $(timeout 5 modinfo $b -F \"$f\" nvidia 2>&1 | head -n 1)\"; done")


def _maps(params: Mapping[str, Any]) -> str:
    pids = training_pids_sh(params.get("process_pattern"))
    return (f"for p in $({pids}); do echo \"--- pid $p\"; "
            f"out=$(grep -hE '{_MAPS_ERE}' /proc/$p/maps 2>&1); rc=$?; "
            "if [ $rc -gt 1 ]; then echo '--- unreadable'; "
            "elif [ $rc -eq 0 ]; then printf '%s\\n' \"$out\" | awk "
            "'{p=$6; for (i = 7; i <= NF; i++) p = p \" \" $i; print p}' | sort -u "
            "| head -n 24; fi; done")


def command(params: Mapping[str, Any]) -> str:
    sections = [
        ("module", "cat /proc/driver/nvidia/version"),
        ("kernel", "uname -r"),
        ("modinfo", _MODINFO),
        ("libs", f"timeout 5 ldconfig -p | grep -E '{_LIBS_ERE}' | head -n 24"),
        ("targets", "for f in $(timeout 5 ldconfig -p | awk "
                    "'/(libnvidia-ml|libcuda)\\.so\\.1 /{print $NF}' | sort -u | head -n 8); "
                    "do echo \"$f -> $(readlink -f \"$f\")\"; done"),
        ("compat", "ls -1d /usr/local/cuda*/compat/libcuda.so.* 2>/dev/null | head -n 16; true"),
        ("fm", "timeout 5 nv-fabricmanager --version"),
        ("modules", "if [ -r /proc/modules ]; then grep -E '^(nvidia|nvidia_uvm|nvidia_drm|"
                    "nvidia_modeset|nvidia_peermem|nv_peer_mem|gdrdrv|ib_core|ib_umad|"
                    "ib_uverbs|mlx5_ib|mlx5_core) ' /proc/modules | cut -d' ' -f1-3; true; "
                    "else echo 'no /proc/modules'; false; fi"),
        ("ib", "ls -1 /sys/class/infiniband 2>/dev/null | head -n 64; true"),
        ("pci", "timeout 5 lspci -nk -d 10de:"),
        ("smi", "timeout 10 nvidia-smi -L"),
        ("maps", _maps(params)),
    ]
    requires = {"modinfo": "modinfo", "libs": "ldconfig", "targets": "ldconfig",
                "fm": "nv-fabricmanager", "pci": "lspci", "smi": "nvidia-smi"}
    return _PATH + script(sections, requires)


parse = guard_parse(NAME, parse_output)

# section -> (what could not be measured, the tool)
_WHAT = {
    "module": ("loaded GPU kernel module version", "/proc/driver/nvidia/version"),
    "modinfo": ("installed GPU kernel module", "modinfo"),
    "libs": ("NVML / libcuda libraries", "ldconfig"),
    "modules": ("loaded kernel modules", "/proc/modules"),
    "pci": ("GPUs on the PCI bus", "lspci"),
    "smi": ("nvidia-smi -L", "nvidia-smi"),
    "maps": ("libraries mapped by the training processes", "/proc/PID/maps"),
}


def check(host: str, facts: dict[str, Any], ctx: Context) -> list[Finding]:
    """Only what could not be read: the faults themselves are the catalogue's. A missing
    /proc/driver/nvidia/version is a fact (no module loaded), not a failure to measure."""
    findings = []
    for name in facts.get("missing") or []:
        if name in _WHAT:
            what, tool = _WHAT[name]
            findings.append(not_measured(NAME, host, what, f"{tool} is not installed"))
    for name, why in sorted((facts.get("errors") or {}).items()):
        if name in _WHAT:
            findings.append(not_measured(NAME, host, _WHAT[name][0], why))
    return findings


PROBE = Probe(NAME, command, parse, check, timeout_s=30.0)
