"""The joblog probe: CUDA OOM (and fragmentation), NaN losses, rendezvous and import errors."""

from __future__ import annotations

import subprocess

import pytest

from probes.base import get_probe
from probes.joblog import command, parse
from probes.parsers import ParseError
from tests.probes.probe_outputs import (
    baseline,
    by_code,
    codes,
    context,
    output,
    real,
    replace,
    sh_accepts,
)

PROBE = get_probe("joblog")
BASE = baseline("joblog")
LOG = "/shared/jobs/llama3-70b/logs/train-*.log"
GIB = 1 << 30


def run(text: str, host: str = "gpu001", **params):
    """One host's checks, and what its reading of the log says (judged in check_fleet)."""
    facts = parse(text)
    ctx = context(params={"log": LOG, **params})
    return facts, PROBE.check(host, facts, ctx) + PROBE.check_fleet({host: facts}, ctx)


def with_log(lines: str) -> str:
    """The baseline with these lines as what the host-side grep let through."""
    return replace(BASE, log=lines)


def test_command_is_valid_sh():
    # with and without a log glob (a hostile one included), sh -n accepts the script
    assert sh_accepts(command({})).returncode == 0
    assert sh_accepts(command({"log": LOG})).returncode == 0
    assert sh_accepts(command({"log": "/x/$(reboot)/*.log; id"})).returncode == 0


def test_script_on_this_host_filters_the_log(tmp_path):
    # run for real on a log file: only the interesting lines leave, the findings follow
    log = tmp_path / "train-1.log"
    log.write_text(
        "step 10 | loss: 2.3012 | lr 3e-4 | tokens/s 401233\n"
        "secret api key: sk-live-123\n"
        "[rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 22.78 GiB. GPU 3 "
        "has a total capacity of 79.10 GiB of which 12.73 GiB is free. Including non-PyTorch "
        "memory, this process has 66.36 GiB memory in use. Of the allocated memory 50.08 GiB is "
        "allocated by PyTorch, and 14.35 GiB is reserved by PyTorch but unallocated.\n"
        "step 11 | loss: nan | lr 3e-4\n")
    out = subprocess.run(["sh", "-c", command({"log": str(tmp_path / "train-*.log")})],
                         capture_output=True, text=True, timeout=60).stdout
    assert "sk-live" not in out and "tokens/s" not in out
    facts = parse(out)
    assert facts["log_files"] == [str(log)]
    ctx = context(params={"log": str(log)})
    findings = PROBE.check("h", facts, ctx) + PROBE.check_fleet({"h": facts}, ctx)
    assert codes(findings) == ["cuda-oom", "loss-nan", "oom-fragmentation"]


def test_parse_baseline():
    # a healthy job: one log file, the alloc conf of the running processes, nothing wrong
    f = parse(BASE)
    assert f["log_files"] == ["/shared/jobs/llama3-70b/logs/train-4471.log"]
    assert f["alloc_conf"] == "expandable_segments:True"
    assert f["oom_count"] == 0 and f["oom_tried_bytes"] is None
    assert f["nan_steps"] == 0 and f["rendezvous_errors"] == [] and f["import_errors"] == []


def test_baseline_raises_nothing():
    # no finding on the healthy job
    assert run(BASE)[1] == []


def test_garbage_is_a_parse_error():
    # foreign text and another probe's output are refused
    with pytest.raises(ParseError):
        parse("tail: cannot open 'train.log' for reading: No such file or directory\n")
    with pytest.raises(ParseError):
        parse(baseline("nccl-tests"))


def test_no_log_param_is_not_measured():
    # the probe ran without params.log
    text = output({"logfiles": "diag: no log param\n", "allocconf": ""})
    f, findings = run(text)
    assert f["log_files"] is None and codes(findings) == ["not-measured"]


def test_no_matching_file_is_not_measured():
    # the glob matches nothing on this host
    _, findings = run(replace(BASE, logfiles="", log=""))
    assert codes(findings) == ["not-measured"]


def test_oom_legacy_format_without_fragmentation():
    # the real torch 2.0 message: 1.69 GiB tried on a 14.56 GiB GPU, ~385 MiB reserved-unused
    f, findings = run(with_log(real("cuda-oom__torch20-legacy-parenthesized-format-14.56gb-gpu")))
    assert f["oom_tried_bytes"] == round(1.69 * GIB)
    assert f["oom_capacity_bytes"] == round(14.56 * GIB)
    assert f["oom_reserved_unallocated_bytes"] == round(1.01 * GIB) - round(649.97 * (1 << 20))
    assert codes(findings) == ["cuda-oom"]


def test_oom_with_fragmentation():
    # the real torch 2.4 message: 9.35 GiB reserved but unallocated (> 2 GiB)
    f, findings = run(with_log(real("cuda-oom__torch24plus-expandable-segments-32gb-gpu")))
    assert f["oom_reserved_unallocated_bytes"] == round(9.35 * GIB)
    assert codes(findings) == ["cuda-oom", "oom-fragmentation"]
    frag = by_code(findings, "oom-fragmentation")[0]
    assert frag.evidence["alloc_conf"] == "expandable_segments:True"


def test_oom_small_gpu_fragmentation_by_share():
    # the real torch 2.1 message: 1.90 MiB unallocated of 4 GiB -> no fragmentation;
    # the same GPU with 1.5 GiB unallocated (> 25% of 4 GiB) -> fragmentation
    sample = real("cuda-oom__torch21-capacty-typo-4gb-gpu")
    assert codes(run(with_log(sample))[1]) == ["cuda-oom"]
    bigger = sample.replace("1.90 MiB is reserved", "1.50 GiB is reserved")
    assert codes(run(with_log(bigger))[1]) == ["cuda-oom", "oom-fragmentation"]


def test_latest_oom_message_is_the_one_read():
    # two OOMs in the tail: the facts come from the last one
    first = real("cuda-oom__torch20-legacy-parenthesized-format-14.56gb-gpu")
    last = real("cuda-oom__torch24plus-expandable-segments-32gb-gpu")
    f, _ = run(with_log(first + last))
    assert f["oom_count"] == 2 and f["oom_tried_bytes"] == round(22.78 * GIB)


@pytest.mark.parametrize("line", [
    "[rank0]: step 1520 | loss: nan | grad_norm: nan | lr 2.99e-04",
    "{'loss': nan, 'grad_norm': nan, 'learning_rate': 1.2e-05, 'epoch': 0.41}",
    "RuntimeError: Loss is NaN, stopping training",
    "iteration     1200/  50000 | lm loss: inf | number of nan iterations:   0 |",
    " iteration 1300/ 50000 | number of skipped iterations:   0 | number of nan iterations:   2 |",
    "train/loss=-inf at step 88",
])
def test_nan_or_inf_loss(line):
    # the loss wordings of plain loops, HF Trainer, Lightning and Megatron
    assert codes(run(with_log(line + "\n"))[1]) == ["loss-nan"]


@pytest.mark.parametrize("line", [
    "step 1520 | loss: 2.3012 | info: checkpoint saved",
    "loss_scale: inf, skipping step (fp16 overflow)",
    " iteration 1300/ 50000 | number of skipped iterations:   1 | number of nan iterations:   0 |",
])
def test_finite_loss_lines_are_not_nan(line):
    # lines the host-side grep may let through that are not a NaN loss
    assert run(with_log(line + "\n"))[1] == []


def test_nan_steps_counts_distinct_steps():
    # three ranks report the same two steps
    lines = "".join(f"[rank{r}]: step {s} | loss: nan\n" for r in range(3) for s in (1520, 1521))
    f, findings = run(with_log(lines))
    assert f["nan_steps"] == 2
    assert by_code(findings, "loss-nan")[0].evidence["nan_steps"] == 2


def test_rendezvous_failures():
    # torchrun's c10d rendezvous timing out, and the store client timing out
    lines = (
        "torch.distributed.elastic.rendezvous.api.RendezvousTimeoutError\n"
        "[W socket.cpp:464] [c10d] The client socket has timed out after 900s while trying to "
        "connect to (gpu001, 29500).\n")
    f, findings = run(with_log(lines))
    assert len(f["rendezvous_errors"]) == 2
    assert codes(findings) == ["rendezvous-failed"]


def test_import_errors():
    # a missing module and a missing libnccl at start
    lines = ("ModuleNotFoundError: No module named 'flash_attn'\n"
             "OSError: libnccl.so.2: cannot open shared object file: No such file or directory\n")
    f, findings = run(with_log(lines))
    assert len(f["import_errors"]) == 2
    assert codes(findings) == ["import-error"]


def test_nccl_plugin_probe_is_not_an_import_error():
    # NCCL looking for its optional net plugin prints this on every healthy run
    line = ("gpu001:48230:48437 [0] NCCL INFO NET/Plugin : dlerror=libnccl-net.so: cannot open "
            "shared object file: No such file or directory No plugin found (libnccl-net.so), "
            "using internal implementation\n")
    assert run(with_log(line))[1] == []


def test_alloc_conf_from_the_log_when_no_process_runs():
    # the job is gone (no process): the alloc conf echoed in the log is used
    text = replace(BASE, allocconf="",
                   log="launch: PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:512\n")
    assert parse(text)["alloc_conf"] == "max_split_size_mb:512"


def test_a_shared_log_read_on_every_node_accuses_none_of_them():
    # --logs /shared/jobs/.../train-*.log: every node greps the same files and reads rank 3's
    # OOM; the line does not say which node it happened on, and no node is at fault
    oom = ("[rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 22.78 GiB. "
           "GPU 3 has a total capacity of 79.10 GiB of which 12.73 GiB is free.\n")
    facts = parse(with_log(oom))
    found = PROBE.check_fleet({f"gpu00{n}": dict(facts) for n in range(1, 9)},
                              context(params={"log": LOG}))
    (oom_found,) = by_code(found, "cuda-oom")
    assert oom_found.hosts == () and oom_found.evidence["hosts_raised"] == 8
    assert oom_found.message.startswith("in the job's log, read the same on gpu[001-008] (8)")
    # a node-local log that only one node has is still that node's
    alone = PROBE.check_fleet({"gpu001": facts, "gpu002": parse(BASE)},
                              context(params={"log": LOG}))
    assert [f.hosts for f in by_code(alone, "cuda-oom")] == [("gpu001",)]
