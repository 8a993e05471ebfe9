"""Symptom matching: a labelled set of phrasings gets the right runbook first."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from assistant.cli import main
from assistant.match import match, normalize
from tests import yamlc

ROOT = Path(__file__).resolve().parent.parent
CASES = yamlc.load((Path(__file__).parent / "data" / "match_cases.yaml").read_text())["cases"]


def case_text(case: dict[str, str]) -> str:
    if "fixture" in case:
        name, line = case["fixture"].rsplit(":", 1)
        lines = (ROOT / "fixtures" / "real" / name).read_text().splitlines()
        return lines[int(line) - 1]
    return case["text"]


def first_runbook(text: str) -> str | None:
    return next((r.id for r in match(text, limit=50) if r.type == "runbook"), None)


def test_labelled_set_is_large_and_mixed() -> None:
    texts = [case_text(c) for c in CASES]
    assert len(texts) >= 60
    assert sum(any("\u4e00" <= ch <= "\u9fff" for ch in t) for t in texts) >= 15
    assert sum("fixture" in c for c in CASES) >= 8


def test_right_runbook_first_for_at_least_90_percent() -> None:
    misses = []
    for case in CASES:
        text = case_text(case)
        got = first_runbook(text)
        if got != case["runbook"]:
            misses.append(f"{case['runbook']:>16} <- got {got}: {text[:80]}")
    accuracy = 1 - len(misses) / len(CASES)
    assert accuracy >= 0.9, f"{accuracy:.0%} right; misses:\n" + "\n".join(misses)


@pytest.mark.parametrize(("raw", "expected"), [
    # rank prefix, PyTorch's log header, numbers and sequence ids go
    ("[rank3]:[E1206 18:44:12.715 ProcessGroupNCCL.cpp:607] [Rank 3] Watchdog caught",
     "e processgroupnccl cpp watchdog caught"),
    # mpirun's [1,0]<stdout>: and NCCL's host:pid:tid prefix go, the message stays
    ("[1,0]<stdout>:5873af64cf59:10158:10560 [0] NCCL INFO NET/IB : No device found.",
     "nccl info net ib no device found"),
    # dmesg timestamp, PCI address and hex go
    ("[430954.509105] NVRM: Xid (PCI:0000:52:00): 48, pid='<unknown>' at 0x18f31d80",
     "nvrm xid pid unknown at"),
    # paths go, but NET/IB is not a path
    ("NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; loaded /usr/lib/x86_64-linux-gnu/libibverbs.so.1",
     "nccl info net ib using mlx ib loaded"),
    # Chinese text is kept
    ("训练卡住 after 3 hours", "训练卡住 after hours"),
])
def test_normalize_strips_log_noise(raw: str, expected: str) -> None:
    assert normalize(raw) == expected


def test_match_json_contract(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["match", "NCCL watchdog timeout", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    results = data["results"]
    assert results and set(results[0]) == {"type", "id", "title", "score"}
    assert [r["score"] for r in results] == sorted((r["score"] for r in results), reverse=True)
    assert {r["type"] for r in results} <= {"runbook", "kb"}


def test_match_mixes_kb_articles() -> None:
    ids = [(r.type, r.id) for r in match("PFC pause storm on RoCE", limit=10)]
    assert ("kb", "pfc-pause-storms") in ids


def test_empty_match_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["match", "   "]) == 2
    assert "nothing to match" in capsys.readouterr().err


@pytest.mark.parametrize("text", ["the weather is nice today", "lorem ipsum dolor sit amet",
                                  "今天天气很好", "asdkjh qwe zzz"])
def test_meaningless_text_matches_no_runbook(text: str,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    """Nothing is better than the least bad runbook: exit 1, said so, and the list to pick from."""
    assert main(["match", text]) == 1
    err = capsys.readouterr().err
    assert "no runbook matches" in err
    for runbook in ("hang", "low-bandwidth", "checkpoint-stall", "queue-idle"):
        assert f"  {runbook} " in err


def test_meaningless_text_json_lists_the_runbooks(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["match", "what is the capital of France", "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert not [r for r in data["results"] if r["type"] == "runbook"]
    assert {"hang", "crash", "oom"} <= {r["id"] for r in data["runbooks"]}


@pytest.mark.parametrize(("text", "runbook"), [
    ("通信超时", "hang"),  # the seeds' own words
    ("带宽低", "low-bandwidth"),
    ("利用率波动", "low-utilization"),
    ("slow allreduce", "low-bandwidth"),
])
def test_engineers_words_reach_their_runbook(text: str, runbook: str,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["match", text, "--json"]) == 0
    results = json.loads(capsys.readouterr().out)["results"]
    assert next(r["id"] for r in results if r["type"] == "runbook") == runbook


def test_a_pasted_xid_line_still_matches() -> None:
    """A log line is mostly words diag has never seen; the few it shares still carry it."""
    line = ("[430954.509105] NVRM: Xid (PCI:0000:52:00): 48, pid='<unknown>', name=<unknown>, "
            "An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer")
    assert first_runbook(line) == "crash"


def test_every_runbook_is_reached_in_english_and_chinese() -> None:
    """Each runbook's symptoms carry both languages, and the labelled set checks both."""
    from assistant.runbook.library import all_runbooks

    def chinese(text: str) -> bool:
        return any("\u4e00" <= ch <= "\u9fff" for ch in text)

    for runbook in all_runbooks():
        assert sum(map(chinese, runbook.symptoms)) >= 2, runbook.id
        assert sum(not chinese(s) for s in runbook.symptoms) >= 2, runbook.id
        cases = [case_text(c) for c in CASES if c["runbook"] == runbook.id]
        assert any(map(chinese, cases)) and not all(map(chinese, cases)), runbook.id
