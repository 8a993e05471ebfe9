"""Docs that must stay true: the probe catalog page, one reference page per user-written format."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path
from typing import Any

import pytest

from assistant import yamlfile
from assistant.fleet.inventory import load_inventory
from assistant.fleet.scenario import load_scenario
from assistant.runbook.library import get_runbook
from assistant.runbook.rehearsal import load_cases, rehearse
from assistant.runbook.validate import validate_text
from probes.base import load_thresholds
from probes.catalog import load_catalog, to_markdown
from tests.signature_examples import judge, judge_variant

DOCS = Path(__file__).resolve().parent.parent / "docs"


def test_probe_catalog_page_matches_the_catalog() -> None:
    # Regenerate with: python -m probes.catalog > docs/probe-catalog.md
    assert (DOCS / "probe-catalog.md").read_text() == to_markdown(load_catalog())


def test_fault_catalogue_page_matches_the_catalogue() -> None:
    # Regenerate with: python -m probes.faults > docs/fault-catalogue.md
    from probes.faults import load_faults
    from probes.faults.__main__ import to_markdown as faults_page

    assert (DOCS / "fault-catalogue.md").read_text() == faults_page(load_faults())


def test_every_user_format_has_a_reference_page_with_an_example() -> None:
    for page in ("runbook-format.md", "kb-format.md", "scenario-format.md",
                 "thresholds-format.md", "inventory-format.md", "architecture.md",
                 "acceptance.md", "fault-format.md"):
        text = (DOCS / page).read_text()
        assert "```" in text, f"{page} has no worked example"


def test_architecture_names_every_module() -> None:
    # docs/architecture.md stays the map of the code: every module outside the TUI's screens and
    # widgets (described as a set) and the one-per-probe / one-per-parser modules is named.
    text = (DOCS / "architecture.md").read_text()
    root = DOCS.parent
    modules = [p for p in (root / "assistant").rglob("*.py")
               if p.name not in ("__init__.py", "__main__.py")
               and p.parent.name not in ("screens", "widgets")]
    modules += [root / "probes" / name for name in ("base.py", "model.py", "catalog.py",
                                                     "hostfold.py")]
    missing = [str(p.relative_to(root)) for p in modules if p.name not in text]
    assert not missing, f"docs/architecture.md does not name {missing}"


# --- every YAML example in the docs is valid, and valid as what it shows ---------------------

FENCE = re.compile(r"^```yaml\n(.*?)^```", re.S | re.M)
STUB = ("    kind: conclusion\n    title: stub\n    explain: stub\n    cause: stub\n"
        "    fix: stub\n    severity: info\n")


def yaml_examples() -> list[tuple[str, str]]:
    pages = [*sorted(DOCS.glob("*.md")), DOCS.parent / "README.md"]
    return [(f"{page.name}:{text[:m.start()].count(chr(10)) + 1}", m.group(1))
            for page in pages for text in [page.read_text()] for m in FENCE.finditer(text)]


EXAMPLES = yaml_examples()


def test_the_docs_have_yaml_examples() -> None:
    assert len(EXAMPLES) >= 8


@pytest.mark.parametrize("where,text", EXAMPLES, ids=[w for w, _ in EXAMPLES])
def test_every_yaml_example_is_valid(where: str, text: str, tmp_path: Path) -> None:
    # Before: the action example in runbook-format.md was not even YAML (an unquoted ": ").
    try:
        data = yamlfile.load(text).data
    except yamlfile.YamlError as exc:
        pytest.fail(f"{where}: line {exc.mark.line}: {exc.message}")
    if isinstance(data, list) and data and "component" in data[0] and "name" in data[0]:
        for entry in data:  # format variants (docs/fault-format.md): judged for real
            judge_variant(entry, where)
        return
    if isinstance(data, list) and data and "signature" in data[0]:
        for example in data:  # fault/twin examples (docs/fault-format.md): judged for real
            judge(example, where)
        return
    assert isinstance(data, dict), where
    if len(data) == 1 and isinstance(next(iter(data.values())), dict) and \
            "kind" in next(iter(data.values())):
        check_node(where, text, data)
    elif "cases" in data:
        check_rehearsal(where, text, tmp_path)
    elif "symptom" in data:
        check_scenario(where, text, data, tmp_path)
    elif "hosts" in data and "defaults" in data:
        check_inventory(where, text, tmp_path)
    elif data and all(k in load_thresholds() for k in data):
        load_thresholds_file(where, text, tmp_path)
    elif "family" in data and "signatures" in data and "exporter" in data["signatures"][0]:
        check_metric_family(where, text, tmp_path)
    elif "family" in data and "signatures" in data:
        check_fault_family(where, data)
    elif "prometheus" in data:
        check_monitoring_config(where, text, tmp_path)
    else:
        pytest.fail(f"{where}: an example of what? (teach this test its kind)")


def check_node(where: str, text: str, data: dict[str, Any]) -> None:
    """A node: valid in a runbook (schema, catalog codes, KB links, conditions) whose other
    nodes are stubs."""
    node_id, node = next(iter(data.items()))
    targets = {b["goto"] for b in node.get("branches", [])}
    targets |= {c["goto"] for c in node.get("choices", [])}
    targets |= {node["next"]} if node.get("next") else set()
    if node["kind"] == "conclusion":
        targets = set()
    runbook = ("id: example\ntitle: example\nsummary: example\nsymptoms: [example]\n"
               f"start: {node_id}\nnodes:\n" + textwrap.indent(text, "  ")
               + "".join(f"  {t}:\n{STUB}" for t in sorted(targets - {node_id})))
    _, issues = validate_text(runbook, "example.yaml")
    assert not issues, f"{where}: " + "; ".join(i.message for i in issues)


def check_metric_family(where: str, text: str, tmp_path: Path) -> None:
    """A metric signature family (docs/monitoring.md), loaded as the shipped ones are."""
    from assistant.monitoring import signatures

    (tmp_path / "example.yaml").write_text(text)
    assert signatures.load(tmp_path), where


def check_monitoring_config(where: str, text: str, tmp_path: Path) -> None:
    """~/.config/diag/monitoring.yaml (docs/monitoring.md)."""
    from assistant.monitoring.config import resolve

    (tmp_path / "monitoring.yaml").write_text(text)
    assert resolve(path=tmp_path / "monitoring.yaml"), where


def check_fault_family(where: str, data: dict[str, Any]) -> None:
    """A fault catalogue family: valid, naming probes the catalog has and thresholds that
    exist (docs/fault-format.md)."""
    from probes.catalog import load_catalog
    from probes.faults.catalogue import read_files
    from probes.faults.predicate import check_predicate

    catalogue = read_files([(where, data)])
    for sig in catalogue.signatures.values():
        assert sig.probe in load_catalog().probes, f"{where}: {sig.id}: probe {sig.probe}"
        if sig.when is not None:
            assert not check_predicate(sig.when, load_thresholds()), where


def check_rehearsal(where: str, text: str, tmp_path: Path) -> None:
    path = tmp_path / "rehearsal.yaml"
    path.write_text(text)
    for case in load_cases(path):
        passed, detail = rehearse(case)
        assert passed, f"{where}: {case.name}: {detail}"


def check_scenario(where: str, text: str, data: dict[str, Any], tmp_path: Path) -> None:
    """A scenario: loads (its output files stood in for), and its answers and expected
    conclusion belong to its runbook."""
    (tmp_path / "scenario.yaml").write_text(text)
    for per_host in (data.get("outputs") or {}).values():
        for ref in per_host.values():
            if isinstance(ref, dict) or "\n" in ref:  # section patches, inline text
                continue
            (tmp_path / ref).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / ref).write_text("")
    if data.get("monitoring"):  # a recorded window: the demo's stands in for it
        from assistant.monitoring.recorded import load

        demo = Path(__file__).resolve().parents[1] / "fixtures/scenarios/demo/monitoring.yaml"
        (tmp_path / data["monitoring"]).write_text(demo.read_text())
        assert load(tmp_path / data["monitoring"]).findings, where
    scenario = load_scenario(str(tmp_path))
    runbook = get_runbook(scenario.runbook)
    for question, choice in scenario.answers.items():
        assert runbook.nodes[question].choice(choice), f"{where}: {question}={choice}"
    assert scenario.expect["conclusion"] in runbook.nodes, where


def check_inventory(where: str, text: str, tmp_path: Path) -> None:
    path = tmp_path / "inventory.yaml"
    path.write_text(text)
    load_inventory(path)


def load_thresholds_file(where: str, text: str, tmp_path: Path) -> None:
    path = tmp_path / "thresholds.yaml"
    path.write_text(text)
    load_thresholds(path)
