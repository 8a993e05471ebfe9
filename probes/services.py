"""services: the daemons the GPUs and the fabric depend on, and what the GPUs say of the fabric.

An evidence-sweep component. On an NVSwitch system (HGX/DGX A100, H100, H200; B200/B300, whose
NVSwitches are managed through the baseboard's CX7 "LPF" ports) no CUDA context can be made until
the fabric manager has programmed the switches and every GPU has registered with the fabric;
a fabric manager that is down, failed or restarting leaves CUDA failing with
cudaErrorSystemNotReady. nvidia-persistenced keeps the driver initialised between jobs, DCGM's
hostengine feeds the health monitoring, nvidia-imex serves multi-node NVLink (GB200 NVL), openibd
loads the MLNX_OFED stack, and slurmd/munge keep the node in the scheduler.

Sections (every command bounded, all read-only):
- units:       ``systemctl show`` of those units in one call (a unit that does not exist says
               LoadState=not-found, which is not a fault by itself);
- procs:       how many of each daemon's processes run (the answer where there is no systemd);
- pci:         ``lspci -nk -d 10de:``: NVSwitch bridges (class 0680) and GPUs, those bound to
               vfio-pci (a virtual machine's) left out;
- lpf:         the CX7 ports whose VPD says SMDL=SW_MNG (Blackwell baseboards' NVSwitch
               management, FM user guide "Systems using fourth generation NVSwitches"; the VPD
               is readable by root only, so as another user this is "not measured");
- persistence: persistence mode and name per GPU (``nvidia-smi --query-gpu``);
- fabric:      the Fabric block of each GPU in ``nvidia-smi -q`` (State/Status/CliqueId/...), and
               what the driver says must be done to the GPU: "GPU Recovery Action" (R565 on:
               None, Reset, Reboot, Drain P2P, Drain and Reset) and the older "GPU Reset
               Status" block (Reset Required / Drain and Reset Recommended).

Findings come from the fault catalogue (probes/faults/gpu-services.yaml); the check only says
what could not be read.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from probes.base import (
    Context,
    Probe,
    Section,
    guard_parse,
    not_measured,
    script,
    split_sections,
)
from probes.driver_facts import PASSTHROUGH_DRIVERS, lspci_devices
from probes.model import Finding
from probes.parsers import ParseError, nvidia_smi_fabric, nvidia_smi_query, systemctl_show

NAME = "services"

# The units a GPU node's health depends on (systemd names without ".service").
UNITS = ("nvidia-fabricmanager", "nvidia-persistenced", "nvidia-dcgm", "dcgm", "nvidia-imex",
         "openibd", "nv_peer_mem", "slurmd", "munge")
_PROPERTIES = ("Id,LoadState,ActiveState,SubState,Result,NRestarts,ExecMainStatus,"
               "UnitFileState,ActiveEnterTimestampMonotonic")
# Process names as the kernel keeps them (comm, at most 15 characters) -> the fact's name.
DAEMONS = {"nv-fabricmanage": "fabricmanager", "nvlsm": "nvlsm",
           "nvidia-persiste": "persistenced", "nv-hostengine": "hostengine",
           "nvidia-imex": "imex", "slurmd": "slurmd", "munged": "munged"}
# The fabric block of nvidia-smi -q and the GPU lines it belongs to; the rest of the report is
# dropped on the node (an 8-GPU report is thousands of lines).
# R535-R565 print "GPU Reset Status" (Reset Required / Drain and Reset Recommended), R565 on the
# "GPU Recovery Action" line: both are kept with the GPU line they belong to.
_FABRIC_AWK = ("awk '/^GPU [0-9A-Fa-f]/{print; f=0; next} "
               "/^[ \\t]+(Fabric|GPU Reset Status)[ \\t]*$/{print; f=1; next} "
               "/^[ \\t]+GPU Recovery Action[ \\t]*:/{print; f=0; next} "
               "f && /^        /{print; next} {f=0}'")

# IMEX's node list: IMEX_NODE_CONFIG_FILE of the config file the unit starts nvidia-imex with
# (-c/--config, default /etc/nvidia-imex/config.cfg), else /etc/nvidia-imex/nodes_config.cfg
# (NVIDIA IMEX Guide, "IMEX Service Config Options"); its addresses (one a line) are the nodes of
# the IMEX domain. "nodes_config PATH N" (N addresses), "absent PATH" or "unreadable PATH".
_IMEX = (
    "c=/etc/nvidia-imex/config.cfg; e=$(timeout 5 systemctl show -p ExecStart nvidia-imex.service"
    " 2>/dev/null | sed -nE 's/.* (-c|--config)[ =]([^ ;]+).*/\\2/p' | head -n 1); "
    '[ -n "$e" ] && c=$e; n=$(sed -nE '
    "'s/^[[:space:]]*IMEX_NODE_CONFIG_FILE=[[:space:]]*([^[:space:]]*).*/\\1/p' \"$c\" "
    "2>/dev/null | tail -n 1); [ -n \"$n\" ] || n=/etc/nvidia-imex/nodes_config.cfg; "
    "if [ -r \"$n\" ]; then echo \"nodes_config $n $(grep -cvE '^[[:space:]]*(#|$)' \"$n\")\"; "
    "elif [ -e \"$n\" ]; then echo \"unreadable $n\"; else echo \"absent $n\"; fi")

_SECTIONS = [
    ("clock", "cut -d' ' -f1 /proc/uptime"),
    ("units", "timeout 5 systemctl show " + " ".join(f"{u}.service" for u in UNITS)
     + f" -p {_PROPERTIES} --no-pager"),
    ("procs", "for n in " + " ".join(DAEMONS) + "; do "
              "echo \"$n $(pgrep -x \"$n\" 2>/dev/null | wc -l)\"; done"),
    ("pci", "timeout 5 lspci -nk -d 10de:"),
    ("lpf", "if ls /sys/class/infiniband/*/device/vpd >/dev/null 2>&1; then "
            "timeout 3 grep -la 'SMDL=SW_MNG' /sys/class/infiniband/*/device/vpd 2>&1 "
            "| head -n 32; true; else echo 'no vpd'; fi"),
    ("persistence", "timeout 10 nvidia-smi --query-gpu=index,pci.bus_id,name,persistence_mode "
                    "--format=csv"),
    ("fabric", "out=$(timeout 10 nvidia-smi -q 2>&1); rc=$?; if [ $rc -eq 0 ]; then "
               f"printf '%s\\n' \"$out\" | {_FABRIC_AWK}; else printf '%s\\n' \"$out\" "
               "| head -n 5; fi; (exit $rc)"),
    ("imex", _IMEX),
]
_REQUIRES = {"units": "systemctl", "procs": "pgrep", "pci": "lspci",
             "persistence": "nvidia-smi", "fabric": "nvidia-smi"}


# lspci is in /usr/sbin on RHEL-family systems, which a non-root SSH session's PATH may lack.
_PATH = 'PATH="$PATH:/usr/sbin:/sbin"; export PATH\n'


def command(params: Mapping[str, Any]) -> str:
    return _PATH + script(_SECTIONS, _REQUIRES)


# --- parsing ---------------------------------------------------------------------------------

_LPF = re.compile(r"/sys/class/infiniband/([^/\s]+)/device/vpd$")
# HGX/DGX B100, B200, B300 GPUs ("NVIDIA B200", "NVIDIA B300 SXM6 AC"): fourth-generation
# NVSwitch baseboards that need the fabric manager and NVLSM (FM User Guide, "Systems Using
# Fourth Generation NVSwitches"); never GB200/GB300 (their switches are in other trays).
_LPF_BOARD = re.compile(r"(?<![A-Za-z0-9])B(?:100|200|300)\b")


def _first_line(text: str, rc: int | None) -> str:
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return line[:200] or f"exit status {rc}"


def _int(value: str | None) -> int | None:
    return int(value) if value is not None and re.fullmatch(r"\d+", value.strip()) else None


def _units(text: str, uptime: float | None) -> list[dict[str, Any]]:
    units = []
    for props in systemctl_show.parse(text)["units"]:
        name = props.get("Id")
        entered = _int(props.get("ActiveEnterTimestampMonotonic"))
        active = props.get("ActiveState")
        since = None
        if active == "active" and entered and uptime is not None:
            since = max(0.0, round(uptime - entered / 1e6, 1))
        units.append({
            "name": name.removesuffix(".service") if name else None,
            "load": props.get("LoadState"), "active": active, "sub": props.get("SubState"),
            "result": props.get("Result"), "restarts": _int(props.get("NRestarts")),
            "exit_status": _int(props.get("ExecMainStatus")),
            "enabled": props.get("UnitFileState") or None, "active_for_s": since,
        })
    return units


def _persistence(text: str) -> list[dict[str, Any]]:
    rows = nvidia_smi_query.parse(text)["rows"]
    out = []
    for row in rows:
        mode = row.get("persistence_mode")
        index = row.get("index")
        name = row.get("name")
        out.append({"index": index if isinstance(index, int) else None,
                    "bus_id": row.get("pci.bus_id"),
                    "name": str(name) if name not in (None, "") else None,
                    "enabled": {"enabled": True, "disabled": False}.get(str(mode).lower())})
    return out


def _running(name: str, facts: dict[str, Any], unit: str | None) -> bool | None:
    """Is a daemon running: its processes if they were counted, else its unit's state."""
    count = (facts["daemons"] or {}).get(name)
    if count is not None:
        return bool(count > 0)
    entry = next((u for u in facts["units"] if unit and u["name"] == unit), None)
    if entry is None or entry["active"] is None:
        return None
    return entry["active"] in ("active", "reloading")


def _in_cluster(gpu: Mapping[str, Any]) -> bool:
    """A GPU registered in a multi-node NVLink cluster: a ClusterUUID other than zeros, or a
    CliqueId other than 0 (NVML nvmlGpuFabricInfo_v2_t: both are zero on a single NVSwitch
    baseboard such as HGX H100, and name the NVLink domain on GB200/GB300 NVL)."""
    uuid, clique = gpu.get("cluster_uuid"), gpu.get("clique_id")
    zero = isinstance(uuid, str) and not uuid.replace("0", "").replace("-", "")
    return (isinstance(uuid, str) and not zero) or (isinstance(clique, int) and clique > 0)


def _imex(sec: Section, facts: dict[str, Any]) -> None:
    """How many nodes the IMEX node list names (0: no list, or an empty one)."""
    line = next((ln.split() for ln in sec.text.splitlines() if ln.strip()), [])
    if len(line) == 3 and line[0] == "nodes_config" and line[2].isdigit():
        facts["imex_nodes"], facts["imex_nodes_config"] = int(line[2]), line[1]
    elif len(line) == 2 and line[0] == "absent":
        facts["imex_nodes"], facts["imex_nodes_config"] = 0, line[1]
    else:
        facts["errors"]["imex"] = _first_line(sec.text, sec.rc)


def _parse(text: str) -> dict[str, Any]:
    sections = split_sections(text)
    if not {"units", "fabric", "pci"} & set(sections):
        raise ParseError("services: no units, pci or fabric section (not this probe's output)")
    facts: dict[str, Any] = {
        "uptime_s": None, "units": [], "unit_active": {}, "daemons": None,
        "nvswitch_count": None, "gpu_pci_count": None, "nvlink_mgmt_ports": None,
        "fabric_manager_needed": None, "fabric": [], "fabric_supported": None,
        "fm_active_for_s": None, "persistence": [], "persistence_off_count": None,
        "gpu_recovery": [], "nvlink_domain": None, "imex_nodes": None, "imex_nodes_config": None,
        "missing": [], "errors": {},
    }
    for name, _ in _SECTIONS:
        sec = sections.get(name)
        if sec is None or sec.missing:
            facts["missing"].append(name)

    def read(name: str) -> Section | None:
        sec = sections.get(name)
        return None if sec is None or sec.missing else sec

    def failed(name: str, sec: Section) -> bool:
        if sec.rc != 0:
            facts["errors"][name] = _first_line(sec.text, sec.rc)
            return True
        return False

    if (sec := read("clock")) and not failed("clock", sec):
        value = sec.text.strip()
        facts["uptime_s"] = float(value) if re.fullmatch(r"\d+(?:\.\d+)?", value) else None
    if sec := read("units"):
        try:
            facts["units"] = _units(sec.text, facts["uptime_s"])
        except ParseError as exc:
            facts["errors"]["units"] = str(exc)[:200]
        if not facts["units"]:
            facts["errors"].setdefault("units", _first_line(sec.text, sec.rc))
        facts["unit_active"] = {u["name"]: u["active"] for u in facts["units"] if u["name"]}
        fm = next((u for u in facts["units"] if u["name"] == "nvidia-fabricmanager"), None)
        facts["fm_active_for_s"] = fm["active_for_s"] if fm else None
    if (sec := read("procs")) and not failed("procs", sec):
        counts = {}
        for line in sec.text.splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[0] in DAEMONS and parts[1].isdigit():
                counts[DAEMONS[parts[0]]] = int(parts[1])
        facts["daemons"] = counts or None
    if (sec := read("pci")) and not failed("pci", sec):
        # a device bound to vfio-pci is a virtual machine's (full passthrough of the baseboard:
        # the fabric manager runs in the VM, FM User Guide "Full Passthrough Virtualization Model")
        classes = [c for c, drv in lspci_devices(sec.text) if drv not in PASSTHROUGH_DRIVERS]
        facts["nvswitch_count"] = sum(1 for c in classes if c == "0680")
        facts["gpu_pci_count"] = sum(1 for c in classes if c in ("0300", "0302"))
    if sec := read("lpf"):
        lines = [ln.strip() for ln in sec.text.splitlines() if ln.strip()]
        ports = {m.group(1) for ln in lines if (m := _LPF.search(ln))}
        denied = any("denied" in ln.lower() for ln in lines)
        if lines == ["no vpd"]:
            facts["nvlink_mgmt_ports"] = 0
        elif ports or not denied:
            facts["nvlink_mgmt_ports"] = len(ports)
            if sec.rc not in (0, 1):
                facts["errors"]["lpf"] = _first_line(sec.text, sec.rc)
        else:
            facts["errors"]["lpf"] = "the NICs' VPD is readable by root only"
    switches, lpf = facts["nvswitch_count"], facts["nvlink_mgmt_ports"]
    if (switches or 0) > 0 or (lpf or 0) > 0:
        facts["fabric_manager_needed"] = True
    elif switches == 0 and lpf == 0:
        facts["fabric_manager_needed"] = False
    if (sec := read("persistence")) and not failed("persistence", sec):
        try:
            facts["persistence"] = _persistence(sec.text)
            facts["persistence_off_count"] = sum(
                1 for g in facts["persistence"] if g["enabled"] is False)
        except ParseError as exc:
            facts["errors"]["persistence"] = str(exc)[:200]
    if any(_LPF_BOARD.search(g.get("name") or "") for g in facts["persistence"]):
        # an HGX/DGX B100/B200/B300 baseboard: its NVSwitches are not on the PCI bus and the
        # management ports' VPD is root's, but the board needs the fabric manager all the same
        facts["fabric_manager_needed"] = True
    if (sec := read("fabric")) and not failed("fabric", sec):
        try:
            parsed = nvidia_smi_fabric.parse(sec.text)
            fabric = parsed["gpus"]
            facts["fabric"] = fabric
            facts["gpu_recovery"] = parsed["recovery"]
            facts["fabric_supported"] = any(
                g["state"] not in (None, "Not Supported") for g in fabric)
            facts["nvlink_domain"] = any(_in_cluster(g) for g in fabric)
        except ParseError as exc:
            facts["errors"]["fabric"] = str(exc)[:200]
    if sec := read("imex"):
        _imex(sec, facts)
    for fact, daemon, unit in (("fabricmanager_running", "fabricmanager", "nvidia-fabricmanager"),
                               ("persistenced_running", "persistenced", "nvidia-persistenced"),
                               ("imex_running", "imex", "nvidia-imex"),
                               ("hostengine_running", "hostengine", "nvidia-dcgm"),
                               ("slurmd_running", "slurmd", "slurmd"),
                               ("munged_running", "munged", "munge")):
        facts[fact] = _running(daemon, facts, unit)
    facts["nvlsm_running"] = _running("nvlsm", facts, None)
    return facts


parse = guard_parse(NAME, _parse)

_WHAT = {
    "units": ("systemd unit states", "systemctl"), "procs": ("daemon processes", "pgrep"),
    "pci": ("NVSwitch count", "lspci"), "persistence": ("GPU persistence mode", "nvidia-smi"),
    "fabric": ("GPU fabric state", "nvidia-smi"), "lpf": ("Blackwell NVSwitch management ports",
                                                          "VPD"),
}


def check(host: str, facts: dict[str, Any], ctx: Context) -> list[Finding]:
    """Only what could not be read: the faults themselves are the catalogue's."""
    findings = []
    for name in facts.get("missing") or []:
        if name in _WHAT:
            what, tool = _WHAT[name]
            findings.append(not_measured(NAME, host, what, f"{tool} is not installed"))
    for name, why in sorted((facts.get("errors") or {}).items()):
        # the management ports matter only where lspci did not already answer the question
        if name == "lpf" and facts.get("fabric_manager_needed") is not None:
            continue
        if name in _WHAT:
            findings.append(not_measured(NAME, host, _WHAT[name][0], why))
    return findings


PROBE = Probe(NAME, command, parse, check, timeout_s=30.0)
