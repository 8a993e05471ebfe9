"""The ranks probe: its script run for real on generated 64-rank logs, the fleet merge, the walk.

The node-side script is run with ``sh`` on this machine over real files (per-rank logs on
"shared storage", node-local logs, big files that take the head/tail path); the hang runbook
is walked end to end with the local transport.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from assistant.cli import main
from assistant.fleet.local import LocalTransport
from assistant.runbook.provider import FleetProvider
from bench import ranks as gen
from bench.ranks import RankSpec as RS
from probes import rankfiles, ranks
from probes.base import get_probe
from probes.parsers import ParseError
from tests.probes.probe_outputs import baseline, by_code, codes, context, sh_accepts

PROBE = get_probe("ranks")
HOSTS = [f"gpu{i:03d}" for i in range(1, 9)]


def run_script(params: dict, cwd: Path | None = None) -> str:
    out = subprocess.run(["sh", "-c", ranks.command(params)], capture_output=True, text=True,
                         timeout=120, cwd=cwd)
    assert out.returncode == 0, out.stderr
    return out.stdout


def fleet_findings(facts_by_host: dict, **params) -> list:
    return PROBE.check_fleet(facts_by_host, context(params={"peers": HOSTS, **params}))


@pytest.fixture()
def straggler_job(tmp_path: Path) -> Path:
    """64 ranks on gpu001-gpu008; rank 37 (gpu005) never issued work 1580."""
    gen.write_job(tmp_path / "job", gen.job(64, {37: RS("quiet")}, noise_lines=200))
    return tmp_path / "job"


def test_command_is_valid_sh():
    for params in ({}, {"logs": "/shared/job-1234/rank*.log"},
                   {"logs": ["/a/*.log", "/b/rank[0-9].log"], "max_files": "x"},
                   {"logs": "/x/$(reboot)/*.log; id `id`"}):
        assert sh_accepts(PROBE.command(params)).returncode == 0


def test_hostile_glob_runs_nothing(tmp_path: Path):
    marker = tmp_path / "pwned"
    out = run_script({"logs": f"/nonexistent/$(touch {marker})/*.log; touch {marker}"})
    assert not marker.exists()
    assert PROBE.parse(out)["log_files"] == []


def test_script_sends_only_the_relevant_lines(straggler_job: Path):
    (straggler_job / "rank00.log").open("a").write("export HF_TOKEN=hf_secret_123\n")
    (straggler_job / "notes with space.log").write_text("nothing to see\n")
    out = run_script({"logs": str(straggler_job / "*.log")})
    assert "hf_secret" not in out and "tokens/s" not in out and "UserWarning" not in out
    assert len(out) < 64 * 1200  # three lines per rank, not 200 lines of noise
    facts = PROBE.parse(out)
    assert facts["log_files_total"] == 65 and facts["files_read"] == 65
    assert f"{straggler_job}/notes with space.log" in facts["log_files"]
    assert facts["verdict"] == "straggler" and facts["ranks_seen"] == 64
    assert facts["max_last_completed_seq"] == 1579
    found = fleet_findings({"gpu001": facts})
    assert codes(found) == ["straggler-rank"] and found[0].hosts == ("gpu005",)


def test_big_files_take_the_head_and_tail_path(straggler_job: Path, monkeypatch):
    # files above WHOLE_FILE_BYTES are read with head/tail (seeking), with the same result
    whole = PROBE.parse(run_script({"logs": str(straggler_job / "*.log")}))
    monkeypatch.setattr(ranks, "WHOLE_FILE_BYTES", 1000)
    out = run_script({"logs": str(straggler_job / "*.log")})
    assert out.count("=== diag:file ") == 64
    big = PROBE.parse(out)
    assert big["stragglers"] == whole["stragglers"]
    assert big["table"] == whole["table"]
    # tail_lines bounds what is read of a big file: with 2 lines the watchdog lines (3rd and
    # 2nd from the end) are partly out of reach
    short = PROBE.parse(run_script({"logs": str(straggler_job / "*.log"), "tail_lines": 2}))
    assert all(t["op"] is None for t in short["table"])


def test_max_files_keeps_the_newest(straggler_job: Path):
    facts = PROBE.parse(run_script({"logs": str(straggler_job / "*.log"), "max_files": 5}))
    assert facts["log_files_total"] == 5


def test_parse_baseline_and_no_finding():
    facts = PROBE.parse(baseline("ranks"))
    assert facts["ranks_seen"] == 16 and facts["world_size"] == 16
    assert facts["verdict"] == "no-timeouts" and facts["max_last_completed_seq"] is None
    assert facts["log_files_total"] == 16
    assert fleet_findings({h: PROBE.parse(baseline("ranks")) for h in HOSTS}) == []


def test_no_log_param_is_not_measured():
    facts = PROBE.parse(run_script({}))
    assert facts["log_files"] is None
    found = fleet_findings({"gpu001": facts, "gpu002": facts})
    assert codes(found) == ["not-measured"] and found[0].hosts == ("gpu001", "gpu002")
    assert "--logs" in found[0].message


def test_no_matching_file_is_not_measured(tmp_path: Path):
    facts = PROBE.parse(run_script({"logs": str(tmp_path / "nothing*.log")}))
    assert facts["log_files"] == []
    found = fleet_findings({"gpu001": facts}, logs=str(tmp_path / "nothing*.log"))
    assert codes(found) == ["not-measured"] and "no file matches" in found[0].message


def test_garbage_is_a_parse_error():
    with pytest.raises(ParseError):
        PROBE.parse("ls: cannot access '/shared': No such file or directory\n")
    with pytest.raises(ParseError):
        PROBE.parse(baseline("nccl"))


def test_shared_logs_read_by_every_node_count_once(straggler_job: Path):
    out = run_script({"logs": str(straggler_job / "rank*.log")})
    found = fleet_findings({h: PROBE.parse(out) for h in HOSTS})
    assert codes(found) == ["straggler-rank"]
    assert found[0].evidence["total"] == 1 and found[0].hosts == ("gpu005",)


def test_node_local_logs_are_named_by_the_node_that_read_them(tmp_path: Path):
    # torchrun --log-dir on each node's local disk: the same relative paths, no hostnames in
    # the lines; rank 13 (on gpu002) never issued work 1580
    bodies = list(gen.job(16, {13: RS("dump")}, nccl_info=False, tagged=False).values())
    facts = {}
    for host, chunk in (("gpu001", bodies[:8]), ("gpu002", bodies[8:])):
        node = tmp_path / host
        for local, body in enumerate(chunk):
            (node / "attempt_0" / str(local)).mkdir(parents=True)
            (node / "attempt_0" / str(local) / "stderr.log").write_text(body)
        facts[host] = PROBE.parse(run_script({"logs": "attempt_0/*/stderr.log"}, cwd=node))
    found = fleet_findings(facts)
    assert codes(found) == ["straggler-rank"] and found[0].hosts == ("gpu002",)
    assert found[0].evidence["ranks"][0]["rank"] == 13


def test_operator_rank_map(tmp_path: Path):
    gen.write_job(tmp_path, gen.job(16, {13: RS("dump")}, nccl_info=False))
    facts = PROBE.parse(run_script({"logs": str(tmp_path / "*.log")}))
    found = fleet_findings({"a": facts, "b": facts}, rank_hosts="gpu001:0-7 gpu002:8-15")
    assert found[0].hosts == ("gpu002",)


def test_identical_lines_travel_once(straggler_job: Path):
    # 63 identical timeout rows keep one example line; the odd rank keeps its own
    facts = PROBE.parse(run_script({"logs": str(straggler_job / "*.log")}))
    rows = [r for s in facts["sources"] for r in s["rows"]]
    assert len(rows) == 63 and sum("line" in r for r in rows) == 1
    assert len(json.dumps(facts)) < 64 * 1024  # under 1 KB per rank


def test_read_local_gives_the_probes_answer(straggler_job: Path):
    local = rankfiles.read_local([str(straggler_job / "rank*.log")], peers=HOSTS)
    assert local["verdict"] == "straggler" and local["unreadable_files"] == 0
    assert [(s["rank"], s["host"]) for s in local["stragglers"]] == [(37, "gpu005")]
    assert rankfiles.read_local([str(straggler_job / "none*.log")])["files_read"] == 0


def test_fleet_provider_over_the_local_transport(straggler_job: Path):
    # the probe as the engine runs it: every "host" reads the shared files
    provider = FleetProvider(LocalTransport())
    outcome = provider.run_probe("ranks", HOSTS, {"logs": str(straggler_job / "rank*.log")},
                                 lambda event: None)
    assert {r.state for r in outcome.hosts.values()} == {"ok"}
    assert outcome.hosts["gpu003"].facts["max_last_completed_seq"] == 1579
    straggler = by_code(outcome.findings, "straggler-rank")
    assert len(straggler) == 1 and straggler[0].hosts == ("gpu005",)


def test_hang_walk_concludes_code_path_diverged_on_a_mismatch(tmp_path, capsys):
    # `diag run hang --auto` on 64 ranks where ranks 21 and 42 wait in BROADCAST at work 1580
    gen.write_job(tmp_path, gen.job(64, {21: RS(op="BROADCAST"), 42: RS(op="BROADCAST")}))
    code = main(["run", "hang", "--hosts", "gpu[001-008]", "--transport", "local",
                 "--param", f"ranks.logs={tmp_path}/rank*.log", "--auto", "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code in (1, 3) and doc["status"] == "concluded"
    assert doc["path"] == ["check-ranks", "code-path-diverged"]
    evidence = doc["conclusion"]["evidence"]
    assert [(f["code"], f["hosts"]) for f in evidence] == [
        ("collective-mismatch", ["gpu003", "gpu006"])]
    assert evidence[0]["evidence"]["counts"] == {"ALLREDUCE": 62, "BROADCAST": 2}


def test_hang_walk_checks_the_stragglers_host_first(straggler_job: Path, capsys):
    # `diag run hang --logs ... --auto` on 64 ranks, rank 37 behind: its host, gpu005, is the
    # first finding and the first host checked on its own.
    main(["run", "hang", "--hosts", "gpu[001-008]", "--transport", "local",
          "--logs", f"{straggler_job}/rank*.log", "--auto", "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert doc["path"][:2] == ["check-ranks", "check-suspect-host"]
    # the straggler is gpu005, and only it (the evidence sweep before the runbook found the
    # NCCL watchdog lines on every host, and what it could not measure on this machine)
    straggler = [f for f in doc["findings"] if f["code"] == "straggler-rank"]
    assert [f["hosts"] for f in straggler] == [["gpu005"]]
