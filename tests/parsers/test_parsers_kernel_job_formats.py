"""Kernel-log and job-log line shapes found in the red-team pass over the kernel and logs
family: each test names the published source of the shape it reads."""

from __future__ import annotations

from probes.parsers import parse
from probes.parsers.kernel_log import split_line


def test_dmesg_xid_reads_mig_attributed_lines() -> None:
    # NVIDIA/open-gpu-kernel-modules src/nvidia/src/kernel/gpu/arch/ampere/ (kern_gpu_ga100.c,
    # later kern_gpu_error_cont_ga100.c): _gpuGenerateErrorLog_GA100's comment (verbatim), and
    # src/nvidia/src/kernel/gpu/rc/kernel_rc.c krcReportXid's
    # "NVRM: Xid (PCI:%04x:%02x:%02x GPU-I:%02u GPU-CI:%02u): %d, pid=%s, name=%s, %s"
    text = (
        "NVRM: Xid (PCI:0000:01:00 GPU-I:05): 94, pid=7194, Contained: CE User Channel (0x9). "
        "RST: No, D-RST: No\n"
        "NVRM: Xid (PCI:0000:01:00): 94, pid=7062, Contained: CE User Channel (0x9). RST: No, "
        "D-RST: No\n"
        "NVRM: Xid (PCI:0000:01:00): 95, pid=7062, Uncontained: LTC TAG (0x2,0x1). RST: Yes, "
        "D-RST: No\n"
        "[1209233.019845] NVRM: Xid (PCI:0000:9b:00 GPU-I:02 GPU-CI:00): 48, pid=2318820, "
        "name=python3, An uncorrectable double bit error (DBE) has been detected on GPU in the "
        "framebuffer at partition 6, subpartition 0.\n")
    f = parse("dmesg-xid", text)
    assert [(x["pci"], x["code"]) for x in f["xids"]] == [
        ("0000:01:00", 94), ("0000:01:00", 94), ("0000:01:00", 95), ("0000:9b:00", 48)]
    assert [(x["gpu_instance"], x["compute_instance"]) for x in f["xids"]] == [
        (5, None), (None, None), (None, None), (2, 0)]
    assert f["xids"][0]["pid"] == "7194" and f["xids"][0]["process"] is None
    assert f["xids"][0]["text"].startswith("Contained: CE User Channel")
    assert f["xids"][3]["process"] == "python3" and f["xids"][3]["uptime_s"] == 1209233.019845


def test_kernel_log_strips_printk_caller_and_rfc5424_header() -> None:
    # kernel/printk/printk.c with CONFIG_PRINTK_CALLER ("[   18.819394][  T298] ..."); RFC 5424
    # section 6 (PRI VERSION TIMESTAMP HOSTNAME APP-NAME PROCID MSGID STRUCTURED-DATA MSG)
    assert split_line("[   18.819394][  T298] rcu: INFO: rcu_sched detected expedited stalls "
                      "on CPUs/tasks:") == (
        18.819394, None, "rcu: INFO: rcu_sched detected expedited stalls on CPUs/tasks:", True)
    assert split_line("[ 1234.567890] [    C3] watchdog: BUG: soft lockup - CPU#3 stuck for "
                      "22s!")[2] == "watchdog: BUG: soft lockup - CPU#3 stuck for 22s!"
    up, ts, msg, seen = split_line(
        '<4>1 2025-01-20T10:18:26.123456+00:00 gpu001 kernel - - [timeQuality tzKnown="1"] '
        "[ 1234.5] INFO: task python:1234 blocked for more than 120 seconds.")
    assert (up, ts, seen) == (1234.5, "2025-01-20T10:18:26.123456+00:00", True)
    assert msg == "INFO: task python:1234 blocked for more than 120 seconds."
    f = parse("kernel-log", "<6>1 2025-01-20T10:18:26Z gpu001 kernel - - - nfs: server nfs01 OK\n")
    assert f["lines"] == [{"uptime_s": None, "timestamp": "2025-01-20T10:18:26Z",
                           "text": "nfs: server nfs01 OK"}]


def test_cuda_oom_reads_nccls_own_allocation_failure() -> None:
    # NVIDIA/nccl src/include/checks.h CUDACHECK: WARN("Cuda failure '%s'", cudaGetErrorString)
    f = parse("cuda-oom", "gpu001:48230:48290 [0] enqueue.cc:1556 NCCL WARN Cuda failure "
                          "'out of memory'\n")
    assert f["count"] == 1 and f["tried_to_allocate_bytes"] is None and f["gpu"] is None
