"""``/proc/pressure/*`` (PSI) parsed from real samples and from the kernel's format."""

from __future__ import annotations

from pathlib import Path

import pytest

from probes.parsers import ParseError
from probes.parsers.proc_pressure import parse

REAL = Path(__file__).resolve().parents[2] / "fixtures" / "real"


def test_cpu_before_5_13_has_only_some():
    # kernel 5.8 (Flatcar): one line for CPU
    f = parse((REAL / "proc-pressure__cpu-flatcar-kernel-5.8-some-line-only.txt").read_text())
    assert f["some"] == {"avg10": 0.13, "avg60": 0.68, "avg300": 0.28, "total_us": 1195993}
    assert f["full"] is None


def test_cpu_since_5_13_has_a_zero_full_line():
    # Linux 6.18: "full" is printed for CPU and is zero at the system level
    f = parse((REAL / "proc-pressure__cpu-linux-6.18-firecracker-vm-some-and-full-zero.txt")
              .read_text())
    assert f["some"]["avg10"] >= 0 and f["full"] == {"avg10": 0.0, "avg60": 0.0,
                                                     "avg300": 0.0, "total_us": 0}


def test_io_some_and_full():
    f = parse((REAL / "proc-pressure__io-flatcar-kernel-5.8-some-and-full.txt").read_text())
    assert f["some"]["avg60"] == 1.11 and f["full"]["total_us"] == 2334731


@pytest.mark.parametrize("text", [
    "cat: /proc/pressure/cpu: Operation not supported\n",  # CONFIG_PSI_DEFAULT_DISABLED
    "cat: /proc/pressure/cpu: No such file or directory\n",  # kernel < 4.20 or no CONFIG_PSI
    "",
    "some avg10=x avg60=0.00 avg300=0.00 total=0\n",
])
def test_not_psi_output_is_refused(text):
    with pytest.raises(ParseError, match="/proc/pressure"):
        parse(text)
