"""XIDs judged by NVIDIA's Xid catalog, which lives as data in probes/xid_catalog.yaml.

NVIDIA publishes, for every Xid code, an immediate action (its "resolution bucket":
RESTART_APP, RESET_GPU, RESTART_BM, CONTACT_SUPPORT, ...) and an investigatory one. diag takes
both from the catalog instead of hard-coded lists, so a code NVIDIA adds or re-buckets is one
line of data, and each finding tells the operator what NVIDIA says to do. The bucket decides
the finding code (xid-drain, xid-reset, xid-application, xid-other); a code the catalog does not
list is still a finding, with its raw kernel-log line, because an XID the driver logged is never
nothing. XID 154 names the recovery action the driver now requires, which decides its bucket.

A site may override a code's immediate bucket with the ``xid_overrides`` threshold.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from probes import shipped

CATALOG_FILE = Path(__file__).with_name("xid_catalog.yaml")
_RECOVERY = re.compile(r"recovery action changed from .*?\bto (0x[0-9a-fA-F]+|\d+)", re.I)


@dataclass(frozen=True)
class XidAction:
    """What the catalog (or a site override) says about one XID code."""

    code: int
    known: bool              # listed in NVIDIA's catalog
    mnemonic: str | None
    description: str | None
    immediate: str           # the immediate bucket ("NONE" when the catalog has none)
    investigatory: str | None
    finding: str             # xid-drain / xid-reset / xid-application / xid-other
    severity: str | None     # a severity other than the finding's default, or None
    action: str              # what to do now, in words
    investigation: str | None  # what to look at next, in words
    overridden: bool = False

    def summary(self) -> dict[str, Any]:
        """The evidence entry for this code (JSON-able)."""
        return {"mnemonic": self.mnemonic, "description": self.description,
                "immediate": self.immediate, "action": self.action,
                "investigatory": self.investigatory, "investigation": self.investigation,
                "in_catalog": self.known, "overridden": self.overridden}


@cache
def catalog() -> dict[str, Any]:
    """The catalog file, checked: every code's buckets exist, every bucket names a finding."""
    data = dict(shipped.data(CATALOG_FILE))
    # the loader keeps mapping keys as text; codes and recovery actions are numbers
    data["codes"] = {int(k): v for k, v in data["codes"].items()}
    data["recovery_actions"] = {int(k): v for k, v in data["recovery_actions"].items()}
    buckets = data["buckets"]
    for name, bucket in buckets.items():
        if bucket.get("finding") not in ("xid-drain", "xid-reset", "xid-application",
                                          "xid-other"):
            raise ValueError(f"{CATALOG_FILE.name}: bucket {name} names no xid-* finding")
    for code, row in data["codes"].items():
        if (row.get("immediate") or "NONE") not in buckets:
            raise ValueError(f"{CATALOG_FILE.name}: code {code}: unknown bucket "
                             f"{row.get('immediate')}")
    for action, bucket in data["recovery_actions"].items():
        if bucket not in buckets:
            raise ValueError(f"{CATALOG_FILE.name}: recovery action {action}: unknown bucket")
    return data


def buckets() -> tuple[str, ...]:
    return tuple(catalog()["buckets"])


def _code(key: Any) -> int | None:
    """An XID code from a mapping key: 13 or "13" (YAML keys arrive as text)."""
    if isinstance(key, bool):
        return None
    if isinstance(key, int):
        return key if key >= 0 else None
    return int(key) if isinstance(key, str) and key.strip().isdecimal() else None


def overrides_by_code(overrides: Mapping[Any, str] | None) -> dict[int, str]:
    return {c: b for k, b in (overrides or {}).items() if (c := _code(k)) is not None}


def check_overrides(overrides: Any) -> list[str]:
    """Problems with an ``xid_overrides`` threshold value (code -> bucket); empty when fine."""
    if not isinstance(overrides, Mapping):
        return ["xid_overrides should map XID codes to buckets"]
    problems = []
    for code, bucket in overrides.items():
        if _code(code) is None:
            problems.append(f"xid_overrides: {code!r} is not an XID code")
        elif bucket not in catalog()["buckets"]:
            problems.append(f"xid_overrides: {code}: {bucket!r} is not a bucket "
                            f"({', '.join(buckets())})")
    return problems


def _recovery_bucket(text: str | None) -> str | None:
    m = _RECOVERY.search(text or "")
    if not m:
        return None
    action = int(m.group(1), 0)
    bucket = catalog()["recovery_actions"].get(action)
    return bucket if isinstance(bucket, str) else "CONTACT_SUPPORT"


def classify(code: int, text: str | None = None,
             overrides: Mapping[Any, str] | None = None) -> XidAction:
    """The catalog's actions for XID *code*; *text* is the rest of its kernel-log line."""
    data = catalog()
    row = data["codes"].get(code)
    immediate = (row or {}).get("immediate") or "NONE"
    investigatory = (row or {}).get("investigatory")
    overridden = False
    if code == 154:
        immediate = _recovery_bucket(text) or immediate
    site = overrides_by_code(overrides)
    if site.get(code) in data["buckets"]:
        immediate, overridden = site[code], True
    bucket = data["buckets"][immediate]
    if row is None and not overridden:
        return XidAction(
            code=code, known=False, mnemonic=None, description=None, immediate="NONE",
            investigatory=None, finding="xid-other", severity="warning",
            action="not in NVIDIA's Xid catalog: read the kernel log line, the driver's "
                   "release notes and nvidia-bug-report.sh output; contact support if it recurs",
            investigation=None)
    investigation = data["investigations"].get(investigatory) if investigatory else None
    return XidAction(
        code=code, known=row is not None,
        mnemonic=(row or {}).get("mnemonic"), description=(row or {}).get("description"),
        immediate=immediate, investigatory=investigatory, finding=bucket["finding"],
        severity=bucket.get("severity"), action=bucket["action"],
        investigation=investigation or investigatory, overridden=overridden)
