"""gpu: the state of every GPU on a host, and the driver's recent complaints about them.

A GPU that hit a hardware XID, fell off the bus, counts uncorrectable ECC errors or waits for a
row remap stops its rank inside a kernel, and every other rank then waits for it in the next
collective: the commonest mid-training hang. One script reads:

- ``nvidia-smi --query-gpu`` (utilization, memory, temperature, power, SM clock, the active
  clock-throttle reasons bitmask, volatile uncorrected ECC, pending retired pages), asked with
  the ``clocks_throttle_reasons`` names and, when the driver refuses those, the newer
  ``clocks_event_reasons`` ones;
- ``nvidia-smi -q -d ROW_REMAPPER`` for pending and failed row remaps (Ampere and later);
- the kernel log's NVRM lines (XIDs, "fallen off the bus"), from ``dmesg`` or, when the kernel
  ring buffer is restricted, ``journalctl -k -o short-monotonic``. Both stamp lines with seconds
  since boot, and the script also prints ``/proc/uptime``, so every line gets an age and only
  the lines younger than the window count: an XID from last week's job is not today's fault.
  The window is ``xid_window_minutes`` (or ``window_minutes``) from the params, else the
  threshold of that name; the command is built with it (journalctl's ``--since``), and the
  checks filter again by age with the context's window;
- ``lspci -n -d 10de:`` to count the GPUs on the PCI bus, so a GPU the driver lost is seen
  missing even on a single node.

Facts: the catalog's, plus ``gpus`` (one entry per GPU), ``xids`` and ``fallen_off_bus`` (events
with their age in minutes), ``pci_gpu_count``, ``gpu_lost`` and ``smi_errors``.
``power_draw_w`` is the mean draw per GPU, ``sm_clock_mhz`` the lowest SM clock (the slowest GPU
sets the pace of a collective), ``ecc_uncorrected`` the sum over the GPUs.
"""

from __future__ import annotations

from probes.base import Probe
from probes.gpu_checks import check, check_fleet
from probes.gpu_facts import NAME, command, parse

PROBE = Probe(NAME, command, parse, check, check_fleet, timeout_s=75.0)
