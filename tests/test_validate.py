"""The validator: every shipped runbook passes; each kind of mistake gets its own error and line."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from assistant.cli import main
from assistant.runbook.library import runbook_files, validate_file
from assistant.runbook.validate import validate_text

DATA = Path(__file__).parent / "data"
BROKEN = sorted((DATA / "broken").glob("*.yaml"))
KB = {"xid-codes"}
EXPECT = re.compile(r"# expect: line (\d+): (\w+): (.+)")


def test_shipped_runbooks_are_valid() -> None:
    files = runbook_files()
    assert len(files) == 10
    for path in files:
        runbook, issues = validate_file(path)
        assert issues == [], "\n".join(map(str, issues))
        assert runbook is not None and runbook.id == path.stem


def test_base_of_the_broken_ones_is_valid() -> None:
    # Every broken case is mini.yaml with one mistake; mini itself must be clean.
    runbook, issues = validate_text((DATA / "mini.yaml").read_text(), "mini.yaml", kb_ids=KB)
    assert issues == [] and runbook is not None


def test_at_least_fifteen_kinds_of_mistake() -> None:
    assert len(BROKEN) >= 15


@pytest.mark.parametrize("path", BROKEN, ids=[p.stem for p in BROKEN])
def test_broken_runbook_names_its_mistake(path: Path) -> None:
    text = path.read_text()
    expect = EXPECT.match(text.splitlines()[0])
    assert expect, "each broken file starts with '# expect: line N: layer: message'"
    line, layer, message = int(expect[1]), expect[2], expect[3]
    runbook, issues = validate_text(text, str(path), kb_ids=KB)
    assert runbook is None
    matching = [i for i in issues if i.layer == layer and message in i.message]
    assert matching, f"expected {layer}: {message!r}, got:\n" + "\n".join(map(str, issues))
    assert matching[0].line == line
    assert matching[0].file == str(path)
    assert matching[0].column >= 1


def test_all_errors_of_a_file_come_at_once() -> None:
    # Two independent reference mistakes in one file: both are reported, not just the first.
    text = (DATA / "mini.yaml").read_text()
    text = text.replace("probes: [gpu]", "probes: [gpux]").replace("goto: too-hot", "goto: hot")
    _, issues = validate_text(text, "mini.yaml", kb_ids=KB)
    messages = [i.message for i in issues]
    assert any("unknown probe 'gpux'" in m for m in messages)
    assert any("goto 'hot'" in m for m in messages)


def test_node_id_is_named_in_the_error() -> None:
    text = (DATA / "mini.yaml").read_text().replace("probes: [versions]", "probes: [nope]")
    _, issues = validate_text(text, "mini.yaml", kb_ids=KB)
    assert [i.node for i in issues] == ["check-versions"]


def test_cli_validate_exit_codes_and_no_traceback(capsys: pytest.CaptureFixture[str]) -> None:
    broken = DATA / "broken" / "unknown-probe.yaml"
    assert main(["runbooks", "validate", str(broken)]) == 2
    err = capsys.readouterr().err
    assert f"{broken}:14:" in err and "Traceback" not in err
    assert main(["runbooks", "validate"]) == 0


def test_cli_validate_missing_file(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["runbooks", "validate", "/nonexistent/runbook.yaml"]) == 2
    assert "no such file" in capsys.readouterr().err


def test_not_a_mapping() -> None:
    _, issues = validate_text("- just\n- a list\n", "x.yaml", kb_ids=KB)
    assert issues[0].layer == "schema" and issues[0].line == 1


def test_a_misspelt_key_is_one_line_naming_it_and_the_allowed_ones() -> None:
    """``explian:`` is one mistake: one line with the key, the likely intended one and the
    allowed keys, not a second "missing required key 'explain'" for the same slip."""
    path = DATA / "broken" / "misspelt-key.yaml"
    _, issues = validate_text(path.read_text(), str(path), kb_ids=KB)
    assert [i.message for i in issues] == [
        "unknown key 'explian' (did you mean 'explain'? allowed: accuses, cause, evidence, "
        "explain, fix, kb, kind, requires, severity, title, unexplained)"]


def test_a_key_far_from_every_allowed_one_suggests_nothing() -> None:
    path = DATA / "broken" / "unknown-key.yaml"
    _, issues = validate_text(path.read_text(), str(path), kb_ids=KB)
    assert [i.message for i in issues] == [
        "unknown key 'colour' (allowed: accuses, cause, evidence, explain, fix, kb, kind, "
        "requires, severity, title, unexplained)"]
