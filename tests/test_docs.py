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
                 "thresholds-format.md", "inventory-format.md", "architecture.md"):
        text = (DOCS / page).read_text()
        assert "```" in text, f"{page} has no worked example"
