"""Docs that must stay true: the probe catalog page, one reference page per user-written format."""

from __future__ import annotations

from pathlib import Path

from probes.catalog import load_catalog, to_markdown

DOCS = Path(__file__).resolve().parent.parent / "docs"


def test_probe_catalog_page_matches_the_catalog() -> None:
    # Regenerate with: python -m probes.catalog > docs/probe-catalog.md
    assert (DOCS / "probe-catalog.md").read_text() == to_markdown(load_catalog())


def test_every_user_format_has_a_reference_page_with_an_example() -> None:
    for page in ("runbook-format.md", "kb-format.md", "scenario-format.md",
                 "thresholds-format.md", "inventory-format.md", "architecture.md",
                 "acceptance.md"):
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
