"""versions: the software stack of each host, and who differs from the rest of the job.

A job whose nodes disagree on driver, CUDA, NCCL or kernel can hang in its first collective or
silently run slower; the odd node out is what the operator needs named.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from probes.base import (
    Context,
    Probe,
    finding,
    fleet_minority,
    not_measured,
    script,
    section_reader,
    split_sections,
)
from probes.model import Finding
from probes.parsers import ParseError
from probes.parsers import parse as parse_kind

NAME = "versions"

_SECTIONS = [
    ("kernel", "uname -r"),
    ("driver", "cat /proc/driver/nvidia/version"),
    ("smi", "nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1; "
            "nvidia-smi | grep -m1 'CUDA Version'"),
    ("nvcc", "nvcc --version"),
    ("libnccl", "for f in $(ldconfig -p | awk '/libnccl\\.so/{print $NF}'); do "
                "readlink -f \"$f\"; done | sort -u"),
    ("torch", "python3 -c 'import torch; print(\"torch\", torch.__version__); "
              "print(\"nccl\", \".\".join(map(str, torch.cuda.nccl.version())))' 2>&1"),
    ("ofed", "ofed_info -s"),
    ("runtime", "for t in docker podman enroot apptainer singularity; do "
                "command -v $t >/dev/null 2>&1 && echo \"$t $($t --version 2>&1 | head -1)\"; "
                "done; true"),
]
_REQUIRES = {"smi": "nvidia-smi", "nvcc": "nvcc", "ofed": "ofed_info", "torch": "python3"}


def command(params: Mapping[str, Any]) -> str:
    return script(_SECTIONS, _REQUIRES)


def parse(text: str) -> dict[str, Any]:
    sections = split_sections(text)
    if "kernel" not in sections:
        raise ParseError("versions: no kernel section")
    facts: dict[str, Any] = {"kernel": None, "driver_version": None, "cuda_version": None,
                             "nccl_version": None, "ofed_version": None,
                             "container_runtime": None, "torch_version": None, "missing": []}

    section = section_reader(sections, facts["missing"], absent_is_missing=True, need_output=True)

    if (text_ := section("kernel")) is not None:
        facts["kernel"] = parse_kind("uname-r", text_)["kernel"]
    if (text_ := section("driver")) is not None:
        facts["driver_version"] = parse_kind("proc-driver-nvidia-version", text_)["driver_version"]
    if (text_ := section("smi")) is not None:
        lines = text_.splitlines()
        if not facts["driver_version"] and lines and re.fullmatch(r"[\d.]+", lines[0].strip()):
            facts["driver_version"] = lines[0].strip()
        cuda = re.search(r"CUDA Version:\s*([\d.]+)", text_)
        facts["driver_cuda_version"] = cuda.group(1) if cuda else None
    if (text_ := section("nvcc")) is not None:
        facts["cuda_version"] = parse_kind("nvcc-version", text_)["cuda_version"]
    # The toolkit's release (nvcc) where it is installed, else the newest CUDA the driver
    # supports (nvidia-smi's "CUDA Version"): two different things, so drift compares each
    # only with its own kind (a node without nvcc is not a node on another CUDA)
    facts["cuda_version_from"] = "nvcc" if facts["cuda_version"] else \
        "driver" if facts.get("driver_cuda_version") else None
    facts["cuda_version"] = facts["cuda_version"] or facts.get("driver_cuda_version")
    if (text_ := section("libnccl")) is not None:
        versions = re.findall(r"libnccl\.so\.(\d+\.\d+\.\d+)", text_)
        facts["nccl_version"] = versions[-1] if versions else None
    if (text_ := section("torch")) is not None:
        torch = re.search(r"^torch (\S+)$", text_, re.M)
        nccl = re.search(r"^nccl (\d+\.\d+\.\d+)$", text_, re.M)
        facts["torch_version"] = torch.group(1) if torch else None
        if nccl:  # the NCCL torch actually loads beats whatever ldconfig lists
            facts["nccl_version"] = nccl.group(1)
    if (text_ := section("ofed")) is not None:
        facts["ofed_version"] = parse_kind("ofed-info", text_)["ofed_version"]
    if (text_ := section("runtime")) is not None:
        facts["container_runtime"] = text_.splitlines()[0].strip() or None
    return facts


def check(host: str, facts: dict[str, Any], ctx: Context) -> list[Finding]:
    if facts.get("driver_version") is None:
        return [not_measured(NAME, host, "GPU driver version",
                             "no /proc/driver/nvidia/version and no nvidia-smi")]
    return []


def check_fleet(facts_by_host: dict[str, dict[str, Any]], ctx: Context) -> list[Finding]:
    findings = []
    for key in ctx.threshold("drift_keys"):
        for values in _comparable(facts_by_host, key):
            odd = fleet_minority(values)
            if not odd:
                continue
            findings.append(finding(
                "version-drift", odd.hosts, odd.differs(key.removesuffix("_version")),
                NAME, key=key, majority=odd.majority, odd=odd.hosts,
                groups={str(v): sorted(hs) for v, hs in odd.groups.items()}))
    baseline = ctx.params.get("baseline") or {}
    for key, pinned in baseline.items():
        off = {h: f.get(key) for h, f in facts_by_host.items()
               if f.get(key) and str(f.get(key)) != str(pinned)}
        if off:
            findings.append(finding(
                "version-baseline-mismatch", off,
                f"{key} differs from the pinned baseline {pinned} on {len(off)} host(s)",
                NAME, key=key, baseline=str(pinned), values=off))
    return findings


def _comparable(facts_by_host: dict[str, dict[str, Any]], key: str
                ) -> list[dict[str, Any]]:
    """The hosts' values of *key*, in groups that may be compared: cuda_version by where it
    was read (nvcc's toolkit release, or the driver's newest CUDA), every other key whole."""
    groups: dict[Any, dict[str, Any]] = {}
    for host, facts in facts_by_host.items():
        if facts.get(key):
            source = facts.get("cuda_version_from") if key == "cuda_version" else None
            groups.setdefault(source, {})[host] = facts[key]
    return list(groups.values())


PROBE = Probe(NAME, command, parse, check, check_fleet, timeout_s=30.0)
