"""Team runbooks and articles without touching the package: a runbook file given by path, a
search path (--runbooks / --kb, $DIAG_RUNBOOKS / $DIAG_KB, ~/.config/diag) that adds and
overrides, and `diag runbooks rehearse` running rehearsal cases without pytest."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from assistant.cli import main
from assistant.locations import runbooks_dir, use_dirs
from tests.tui.tui_support import write_scenario

ARTICLE = """---
id: team-fabric-notes
title: Our fabric's known bad leaf
tags: [network, team]
aliases: [leaf 7 flaps]
---

Leaf 7 flaps under load; move the job off it.
"""


@pytest.fixture(autouse=True)
def _clean_search_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No operator config leaks in, and --runbooks from one test does not reach the next."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.delenv("DIAG_RUNBOOKS", raising=False)
    monkeypatch.delenv("DIAG_KB", raising=False)
    yield
    use_dirs("runbooks", [])
    use_dirs("kb", [])


def team_runbook(directory: Path, name: str = "my", title: str = "Our hang runbook",
                 kb: str = "") -> Path:
    """A copy of the shipped hang runbook under another id (and title, and KB link)."""
    directory.mkdir(parents=True, exist_ok=True)
    text = (runbooks_dir() / "hang.yaml").read_text()
    text = text.replace("id: hang\n", f"id: {name}\n", 1)
    text = text.replace("\ntitle: ", f"\ntitle: {title} # was: ", 1)
    if kb:
        text = text.replace("\nkb: [", f"\nkb: [{kb}, ", 1)
    path = directory / f"{name}.yaml"
    path.write_text(text)
    return path


def out(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_run_a_runbook_file_by_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    team_runbook(tmp_path / "team")
    monkeypatch.chdir(tmp_path / "team")
    code, text, _ = out(["run", "./my.yaml", "--scenario", "demo", "--auto", "--json"], capsys)
    doc = json.loads(text)
    assert (code, doc["runbook"], doc["conclusion"]["id"]) == (1, "my", "ib-link-fault")
    code, text, _ = out(["runbooks", "show", "./my.yaml"], capsys)
    assert code == 0 and text.startswith("Our hang runbook")
    code, _, err = out(["run", "./nope.yaml", "--scenario", "demo"], capsys)
    assert code == 2 and "no runbook file './nope.yaml'" in err


def test_a_copy_under_another_file_name_runs_by_path(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """`cp hang.yaml my.yaml; diag run ./my.yaml`: a file given by path is not looked up by
    its name, so its id (still "hang") need not match it. In a runbooks directory it must:
    that is how the search path finds and overrides runbooks."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "my.yaml").write_text((runbooks_dir() / "hang.yaml").read_text())
    code, text, err = out(["run", "./my.yaml", "--scenario", "demo", "--auto", "--json"],
                          capsys)
    assert code == 1, err
    assert json.loads(text)["conclusion"]["id"] == "ib-link-fault"
    code, text, _ = out(["runbooks", "validate", "./my.yaml"], capsys)
    assert code == 0 and "my.yaml: ok" in text
    (tmp_path / "team").mkdir()
    (tmp_path / "team" / "my.yaml").write_text((runbooks_dir() / "hang.yaml").read_text())
    code, _, err = out(["runbooks", "validate", str(tmp_path / "team")], capsys)
    assert code == 2 and "id 'hang' must match the file name 'my'" in err


def test_a_file_runbook_session_resumes_from_elsewhere(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str],
                                                      ) -> None:
    team_runbook(tmp_path / "team")
    healthy = write_scenario(tmp_path / "healthy", hosts="gpu[001-004]")
    monkeypatch.chdir(tmp_path / "team")
    code, text, _ = out(["run", "./my.yaml", "--scenario", str(healthy), "--auto", "--json"],
                        capsys)
    assert code == 4
    session = json.loads(text)["session"]
    monkeypatch.chdir(tmp_path)  # "my" is on no search path from here
    code, text, err = out(["run", "--resume", session, "--answer", "ask-phase=mid",
                           "--auto", "--json"], capsys)
    assert code == 4, err
    assert json.loads(text)["question"]["node"] == "ask-change"


@pytest.mark.parametrize("how", ["--runbooks", "DIAG_RUNBOOKS", "config"])
def test_the_search_path_adds_and_overrides(how: str, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    team = tmp_path / "config" / "diag" / "runbooks" if how == "config" else tmp_path / "team"
    team_runbook(team)  # adds "my"
    team_runbook(team, name="hang", title="Hang, our way")  # overrides the shipped "hang"
    argv = ["--runbooks", str(team)] if how == "--runbooks" else []
    if how == "DIAG_RUNBOOKS":
        monkeypatch.setenv("DIAG_RUNBOOKS", str(team))
    _, text, _ = out([*argv, "runbooks", "list", "--json"], capsys)
    listed = {r["id"]: r for r in json.loads(text)["runbooks"]}
    assert listed["my"]["source"] == str(team / "my.yaml")
    assert listed["hang"]["title"].startswith("Hang, our way")
    assert listed["crash"]["source"] == "shipped"
    code, text, err = out([*argv, "run", "my", "--scenario", "demo", "--auto", "--json"],
                          capsys)
    assert code == 1 and json.loads(text)["conclusion"]["id"] == "ib-link-fault"
    assert "shipped" not in err  # a runbook of the team's own overrides nothing: no line
    _, text, _ = out([*argv, "match", "training hangs", "--json"], capsys)
    assert "my" in [r["id"] for r in json.loads(text)["results"]]


def test_run_says_which_file_it_walks_instead_of_a_shipped_runbook(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A `--runbooks` file named like a shipped runbook was walked without a word: an operator
    who typed `diag run hang` could not tell the team's copy (or a stale one) was used."""
    team = tmp_path / "team"
    team_runbook(team, name="hang", title="Hang, our way")
    code, text, err = out(["run", "hang", "--runbooks", str(team), "--scenario", "demo",
                           "--auto", "--json"], capsys)
    assert code == 1 and json.loads(text)["runbook"] == "hang", err
    said = [line for line in err.splitlines() if "shipped" in line]
    assert said == [f"diag: runbook 'hang': using {team / 'hang.yaml'} instead of the shipped "
                    f"{runbooks_dir() / 'hang.yaml'}"], err


def test_a_team_article_is_found_and_linkable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "kb").mkdir()
    (tmp_path / "kb" / "team-fabric-notes.md").write_text(ARTICLE)
    monkeypatch.setenv("DIAG_KB", str(tmp_path / "kb"))
    code, text, _ = out(["kb", "show", "team-fabric-notes"], capsys)
    assert code == 0 and "Leaf 7 flaps" in text
    linked = team_runbook(tmp_path / "team", kb="team-fabric-notes")
    code, text, err = out(["runbooks", "validate", str(linked)], capsys)
    assert code == 0, err
    monkeypatch.delenv("DIAG_KB")
    code, _, err = out(["runbooks", "validate", str(linked)], capsys)
    assert code == 2 and "team-fabric-notes" in err


def test_rehearse_runs_cases_without_pytest(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    team_runbook(tmp_path)
    good = tmp_path / "my.rehearsal.yaml"
    good.write_text("""runbook: ./my.yaml
cases:
  - name: a GPU fell off the bus
    probes:
      gpu:
        findings: [{code: gpu-fallen-off-bus, hosts: [gpu003]}]
    conclusion: gpu-hardware-fault
  - name: nothing found, nothing changed
    answers: {ask-phase: mid, ask-change: nothing}
    conclusion: nothing-found
""")
    code, text, err = out(["runbooks", "rehearse", str(good)], capsys)
    assert code == 0, text
    assert text.count("ok  ") == 2 and "2 of 2 case(s) passed" in err
    bad = tmp_path / "bad.yaml"
    bad.write_text("runbook: hang\ncases:\n  - name: wrong\n    conclusion: version-drift\n")
    code, text, _ = out(["runbooks", "rehearse", str(bad)], capsys)
    assert code == 1 and text.startswith("FAIL") and "stopped at 'ask-phase'" in text
    (tmp_path / "broken.yaml").write_text("cases: [1, 2\n")
    code, _, err = out(["runbooks", "rehearse", str(tmp_path / "broken.yaml")], capsys)
    assert code == 2 and "broken.yaml" in err
    # and every shipped rehearsal passes the same way
    shipped = sorted(str(p) for p in (Path(__file__).parents[1] / "rehearsals").glob("*.yaml"))
    code, text, err = out(["runbooks", "rehearse", *shipped], capsys)
    assert code == 0 and not any(line.startswith("FAIL") for line in text.splitlines()), text
