"""The driver component's facts: its script's output (probes/driver.py) read section by section.

Versions are compared here, once, so the fault catalogue compares words: ``*_matches_module``
is True when a layer has the loaded module's exact version, False when it has another, None
when either side was not measured; ``libcuda_vs_module`` of a process says whether the libcuda
it mapped is the loaded module's ("same"), of a newer driver ("newer": the forward-compatibility
case) or of an older one ("older").
"""

from __future__ import annotations

import re
from typing import Any

from probes.base import Section, split_sections
from probes.parsers import ParseError, ldconfig_p, nvidia_smi_L, proc_driver_nvidia_version, uname_r
from probes.parsers.ldconfig_p import file_version

SECTIONS = ("module", "kernel", "modinfo", "libs", "targets", "compat", "fm", "modules", "ib",
            "pci", "smi", "maps")
PEERMEM_MODULES = ("nvidia_peermem", "nv_peer_mem")
_LSPCI = re.compile(r"^\s*(?:[0-9a-fA-F]{4}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]\s+"
                    r"(?P<cls>[0-9a-fA-F]{4}):\s+10de:[0-9a-fA-F]{4}")
_LSPCI_DRIVER = re.compile(r"^\s+Kernel driver in use:\s*(\S+)")
# Drivers that hand a device to a virtual machine: the host does not drive it (Linux
# Documentation/driver-api/vfio.rst; pci-stub reserves a device for assignment).
PASSTHROUGH_DRIVERS = ("vfio-pci", "pci-stub")
_FM_VERSION = re.compile(r"Fabric Manager version is\s*:?\s*(\d+(?:\.\d+)+)", re.I)
_DRIVER_VERSION = re.compile(r"^\d{3}(?:\.\d+){1,2}$")
_MODULE_LINE = re.compile(r"^([A-Za-z0-9_]+)\s+\d+\s")
_PID = re.compile(r"^--- pid (\d+)\s*$")
_DRIVER_LIB = re.compile(r"^(libcuda|libnvidia-ml)\.so(\.|$)")
_DELETED = " (deleted)"
# What each mapped library is, by file name: libcuda.so.550.90.07, libnvidia-ml.so.1,
# libnccl.so.2.21.5, libcudart.so.12 (never libcudart.so for libcuda: the dot matters).
_MAPPED = (("libcuda", re.compile(r"/libcuda\.so[.\d]*$")),
           ("libnvidia_ml", re.compile(r"/libnvidia-ml\.so[.\d]*$")),
           ("libnccl", re.compile(r"/libnccl\.so[.\d]*$")),
           ("libcudart", re.compile(r"/libcudart\.so[.\d]*$")))


def lspci_devices(text: str) -> list[tuple[str, str | None]]:
    """(class, driver in use) of each NVIDIA device of ``lspci -n[k] -d 10de:``: lspci(8) -k
    prints "Kernel driver in use: X" under a device bound to a driver (none when unbound)."""
    devices: list[tuple[str, str | None]] = []
    for line in text.splitlines():
        if m := _LSPCI.match(line):
            devices.append((m.group("cls").lower(), None))
        elif devices and (m := _LSPCI_DRIVER.match(line)):
            devices[-1] = (devices[-1][0], m.group(1))
    return devices


def version_key(version: str | None) -> tuple[int, ...] | None:
    """'550.90.07' -> (550, 90, 7); None when it is not a dotted number."""
    if not version or not re.fullmatch(r"\d+(?:\.\d+)*", version):
        return None
    return tuple(int(p) for p in version.split("."))


def relation(version: str | None, module: str | None) -> str | None:
    """How a library's driver version stands to the loaded module: same / newer / older."""
    a, b = version_key(version), version_key(module)
    if a is None or b is None:
        return None
    return "same" if a == b else "newer" if a > b else "older"


def _same(version: str | None, module: str | None) -> bool | None:
    rel = relation(version, module)
    return None if rel is None else rel == "same"


def _first_line(text: str, rc: int | None) -> str:
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return line[:200] or f"exit status {rc}"


def _driver_version(path: str | None) -> str | None:
    """The driver version in a driver library's file name (libcuda.so.550.90.07), else None."""
    version = file_version(path)
    return version if version and _DRIVER_VERSION.match(version) else None


def _modinfo(text: str, facts: dict[str, Any]) -> None:
    fields = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() in ("version", "vermagic", "filename", "root"):
            fields[key.strip()] = value.strip()
    own = [fields.get(k) for k in ("version", "vermagic", "filename")]
    timed_out = any(own) and all(not v or v.startswith("timeout:") for v in own)
    if timed_out or (set(fields) - {"root"} and not any(own)):
        # modinfo killed by its time-out (nothing printed) or not run: not measured, no fact
        facts["errors"]["modinfo"] = next((v for v in own if v), "modinfo printed nothing")[:200]
        return
    errors = [v for k, v in fields.items()
              if k != "root" and re.search(r"ERROR|not found", v, re.I)]
    if errors or not set(fields) - {"root"}:
        facts["modinfo_error"] = (errors[0] if errors else _first_line(text, None))[:200]
        return
    facts["module_installed"] = fields.get("version") or None
    vermagic = (fields.get("vermagic") or "").split()
    facts["module_vermagic_kernel"] = vermagic[0] if vermagic else None
    facts["module_file"] = fields.get("filename") or None
    # A kABI-tracking kmod (RHEL weak-modules: ELRepo, rpmfusion, distribution kmods) links the
    # module built for an earlier kernel of the same kABI into /lib/modules/<kernel>/weak-updates/
    # of each newer one: its vermagic names the build kernel by design, and it loads.
    facts["module_weak_update"] = "/weak-updates/" in (facts["module_file"] or "")
    facts["module_root"] = fields.get("root") or None


def _libs(libs_text: str | None, targets_text: str | None, facts: dict[str, Any]) -> None:
    entries: list[dict[str, Any]] = []
    if libs_text and libs_text.strip():
        try:
            entries = ldconfig_p.parse(libs_text)["libs"]
        except ParseError:
            entries = []
    resolved: dict[str, str] = {}
    for line in (targets_text or "").splitlines():
        link, sep, dest = line.partition(" -> ")
        if sep and link.strip():
            resolved[link.strip()] = dest.strip()
    nvml: list[dict[str, Any]] = []
    cuda: list[dict[str, Any]] = []
    for entry in entries:
        if not _DRIVER_LIB.match(entry["name"]):
            continue  # libcudart, libcudadebugger, libicudata: not the driver's API libraries
        target: str | None = resolved.get(entry["path"])
        item = {"name": entry["name"], "abi": entry["abi"], "path": entry["path"],
                "target": target or None,
                "version": _driver_version(target) or _driver_version(entry["path"])}
        (nvml if entry["name"].startswith("libnvidia-ml") else cuda).append(item)
    facts["nvml_libs"], facts["libcuda_libs"] = nvml, cuda

    def native(items: list[dict[str, Any]]) -> str | None:
        # the 64-bit .so.1 the loader resolves first; 32-bit (bare "libc6") entries last
        ordered = sorted(items, key=lambda i: (not (i["abi"] or "").count(","),
                                               not i["name"].endswith(".so.1")))
        return next((i["version"] for i in ordered if i["version"]), None)

    facts["nvml_version"], facts["libcuda_version"] = native(nvml), native(cuda)
    facts["nvml_versions"] = sorted({i["version"] for i in nvml if i["version"]})
    facts["libcuda_versions"] = sorted({i["version"] for i in cuda if i["version"]})


def _processes(text: str, module: str | None) -> list[dict[str, Any]]:
    procs: list[dict[str, Any]] = []
    for raw in text.splitlines():
        line = raw.strip()
        if m := _PID.match(line):
            procs.append({"pid": int(m.group(1)), "readable": True, "libcuda": None,
                          "libnvidia_ml": None, "libnccl": None, "libcudart": None})
            continue
        if not procs or not line:
            continue
        if line == "--- unreadable":
            procs[-1]["readable"] = False
            continue
        mapped = line.removesuffix(_DELETED)
        for key, pattern in _MAPPED:
            if pattern.search(mapped) and procs[-1][key] is None:
                procs[-1][key] = line
    for proc in procs:
        lib: str | None = proc["libcuda"]
        path: str | None = lib.removesuffix(_DELETED) if lib else None
        version = _driver_version(path)
        proc["libcuda_version"] = version
        proc["libcuda_deleted"] = lib.endswith(_DELETED) if lib else None
        proc["libcuda_compat"] = ("/compat/" in path) if path else None
        proc["libcuda_vs_module"] = relation(version, module)
        ml = proc["libnvidia_ml"]
        proc["libnvidia_ml_version"] = _driver_version(ml.removesuffix(_DELETED)) if ml else None
        proc["libnvidia_ml_deleted"] = ml.endswith(_DELETED) if ml else None
        for key in ("libnccl", "libcudart"):
            proc[f"{key}_version"] = file_version(proc[key].removesuffix(_DELETED)) \
                if proc[key] else None
    return procs


def _empty() -> dict[str, Any]:
    return {
        "module_loaded": None, "module_state": None, "module_open": None, "module_installed": None,
        "module_vermagic_kernel": None, "module_file": None, "modinfo_error": None,
        "module_weak_update": None, "module_root": None,
        "running_kernel": None, "installed_matches_loaded": None,
        "module_matches_kernel": None, "nvml_libs": [], "libcuda_libs": [],
        "nvml_version": None, "libcuda_version": None, "nvml_versions": [],
        "libcuda_versions": [], "nvml_matches_module": None, "libcuda_matches_module": None,
        "compat_versions": [], "compat_newest": None, "compat_vs_module": None,
        "fm_version": None, "fm_matches_module": None, "modules_loaded": None,
        "peermem_loaded": None, "gdrdrv_loaded": None, "nvidia_uvm_loaded": None,
        "ib_device_count": None, "dmabuf_capable": None, "pci_gpu_count": None,
        "pci_nvswitch_count": None, "pci_passthrough_count": None,
        "fabric_manager_relevant": None,
        "smi_rc": None, "smi_error": None, "smi_error_kind": None, "smi_gpu_count": None,
        "smi_gpus": [], "smi_lost_bus_ids": [], "smi_nvml_library_version": None,
        "smi_inforom_corrupted": [], "smi_inforom_corrupted_count": None,
        "processes": [], "missing": [], "errors": {},
    }


def parse_output(text: str) -> dict[str, Any]:
    sections = split_sections(text)
    if not {"module", "smi", "modinfo"} & set(sections):
        raise ParseError("driver: no module, modinfo or smi section (not this probe's output)")
    facts = _empty()
    for name in SECTIONS:
        sec = sections.get(name)
        if sec is None or sec.missing:
            facts["missing"].append(name)

    def read(name: str, ok_codes: tuple[int, ...] = (0,)) -> str | None:
        sec: Section | None = sections.get(name)
        if sec is None or sec.missing:
            return None
        if sec.rc not in ok_codes:
            facts["errors"][name] = _first_line(sec.text, sec.rc)
            return None
        return sec.text

    module = sections.get("module")
    if module is not None and not module.missing:
        if module.rc == 0:
            try:
                parsed = proc_driver_nvidia_version.parse(module.text)
                facts["module_loaded"] = parsed["driver_version"]
                facts["module_open"] = parsed["open_kernel_module"]
            except ParseError as exc:
                facts["errors"]["module"] = str(exc)[:200]
        elif "No such file" in module.text:
            facts["module_state"] = "not-loaded"
        else:
            facts["errors"]["module"] = _first_line(module.text, module.rc)
        if facts["module_loaded"]:
            facts["module_state"] = "loaded"
        # no /proc/driver/nvidia/version: no module is loaded ("not-loaded"); what that means
        # depends on whether the node has GPUs (pci_gpu_count)
    loaded = facts["module_loaded"]
    if (text_ := read("kernel")) is not None:
        try:
            facts["running_kernel"] = uname_r.parse(text_)["kernel"]
        except ParseError as exc:
            facts["errors"]["kernel"] = str(exc)[:200]
    if (text_ := read("modinfo")) is not None:
        _modinfo(text_, facts)
    facts["installed_matches_loaded"] = _same(facts["module_installed"], loaded)
    if facts["module_vermagic_kernel"] and facts["running_kernel"]:
        facts["module_matches_kernel"] = facts["module_weak_update"] or \
            facts["module_vermagic_kernel"] == facts["running_kernel"]
    libs = read("libs", (0, 1))  # grep finding nothing exits 1: no library is a fact
    targets = read("targets")
    if libs is not None:
        _libs(libs, targets, facts)
        facts["nvml_matches_module"] = _same(facts["nvml_version"], loaded)
        facts["libcuda_matches_module"] = _same(facts["libcuda_version"], loaded)
    if (text_ := read("compat")) is not None:
        versions = {v for line in text_.splitlines() if (v := _driver_version(line.strip()))}
        facts["compat_versions"] = sorted(versions, key=lambda v: version_key(v) or ())
        facts["compat_newest"] = facts["compat_versions"][-1] if versions else None
        facts["compat_vs_module"] = relation(facts["compat_newest"], loaded)
    if (text_ := read("fm")) is not None:
        m = _FM_VERSION.search(text_)
        facts["fm_version"] = m.group(1) if m else None
        facts["fm_matches_module"] = _same(facts["fm_version"], loaded)
    if (text_ := read("modules")) is not None:
        names = sorted({m.group(1) for line in text_.splitlines()
                        if (m := _MODULE_LINE.match(line.strip() + " "))})
        facts["modules_loaded"] = names
        facts["peermem_loaded"] = any(n in names for n in PEERMEM_MODULES)
        facts["gdrdrv_loaded"] = "gdrdrv" in names
        facts["nvidia_uvm_loaded"] = "nvidia_uvm" in names
    if (text_ := read("ib")) is not None:
        facts["ib_device_count"] = len([ln for ln in text_.splitlines() if ln.strip()])
    kernel = version_key((facts["running_kernel"] or "").split("-")[0])
    if facts["module_open"] is not None and kernel:
        # DMA-BUF GPUDirect RDMA: the open kernel module on Linux 5.12 or later
        facts["dmabuf_capable"] = bool(facts["module_open"] and kernel[:2] >= (5, 12))
    if (text_ := read("pci")) is not None:
        devices = lspci_devices(text_)
        host = [c for c, drv in devices if drv not in PASSTHROUGH_DRIVERS]
        facts["pci_gpu_count"] = sum(1 for c in host if c in ("0300", "0302"))
        facts["pci_nvswitch_count"] = sum(1 for c in host if c == "0680")
        facts["pci_passthrough_count"] = len(devices) - len(host)
    _smi(sections.get("smi"), facts)
    facts["fabric_manager_relevant"] = _fm_relevant(facts)
    if (text_ := read("maps")) is not None:
        facts["processes"] = _processes(text_, loaded)
    return facts


# HGX B100/B200/B300: NVSwitches managed through the baseboard's CX7 ports, not on the host's
# PCI bus, and a fabric manager all the same (FM User Guide, "Systems Using Fourth Generation
# NVSwitches"); a GB200/GB300 tray ("NVIDIA GB200") has its switches in other trays.
_LPF_BOARD = re.compile(r"(?<![A-Za-z0-9])B(?:100|200|300)\b")


def _fm_relevant(facts: dict[str, Any]) -> bool | None:
    """Whether the node has a fabric for a fabric manager: NVSwitch bridges on its PCI bus, or
    GPUs of a baseboard that manages them through its own ports; False only when both the bus
    and nvidia-smi -L were read (a PCIe or single-GPU node, a GB200 tray)."""
    names = [str(g.get("name") or "") for g in facts["smi_gpus"]]
    if facts["pci_nvswitch_count"] or any(_LPF_BOARD.search(n) for n in names):
        return True
    return False if facts["pci_nvswitch_count"] == 0 and names else None


def _smi(sec: Section | None, facts: dict[str, Any]) -> None:
    if sec is None or sec.missing:
        return
    facts["smi_rc"] = sec.rc
    if sec.rc == 124:
        facts["smi_error"], facts["smi_error_kind"] = "nvidia-smi -L timed out", "timeout"
        return
    try:
        parsed = nvidia_smi_L.parse(sec.text)
    except ParseError:
        if sec.rc != 0 or sec.text.strip():
            facts["smi_error"] = _first_line(sec.text, sec.rc)
            facts["smi_error_kind"] = "other"
        return
    facts["smi_gpus"] = parsed["gpus"]
    facts["smi_gpu_count"] = len(parsed["gpus"]) if parsed["gpus"] or parsed["error_kind"] \
        in ("no-devices", "device-handle", "gpu-lost") else None
    facts["smi_error"], facts["smi_error_kind"] = parsed["error"], parsed["error_kind"]
    facts["smi_lost_bus_ids"] = parsed["lost_bus_ids"]
    facts["smi_nvml_library_version"] = parsed["nvml_library_version"]
    facts["smi_inforom_corrupted"] = parsed["inforom_corrupted"]
    facts["smi_inforom_corrupted_count"] = len(parsed["inforom_corrupted"])
    # exit status 14 is nvidia-smi's "infoROM is corrupted" (nvidia-smi(1)): the listing stands
    if facts["smi_error"] is None and sec.rc not in (0, None) \
            and not (sec.rc == 14 and parsed["inforom_corrupted"]):
        facts["smi_error"], facts["smi_error_kind"] = _first_line(sec.text, sec.rc), "other"
