"""Every probe keeps the catalog's promises: its facts exist, its codes are the catalog's."""

from __future__ import annotations

import importlib.util

import pytest

from probes.base import REGISTRY, get_probe
from probes.catalog import load_catalog
from tests.probes.probe_outputs import BASELINE, context

CATALOG = load_catalog()
IMPLEMENTED = [name for name, module in REGISTRY.items() if importlib.util.find_spec(module)]


def test_registry_and_catalog_name_the_same_probes() -> None:
    # "sweep" is in the catalog (its facts: how each host answered the sweep) but is no probe
    # module: the engine runs its components (probes/sweep.py)
    assert set(REGISTRY) == set(CATALOG.probes) - {"sweep"}


@pytest.mark.parametrize("name", [n for n in IMPLEMENTED if (BASELINE / f"{n}.txt").exists()])
def test_baseline_reports_every_catalog_fact_and_no_finding(name: str) -> None:
    probe = get_probe(name)
    facts = probe.parse((BASELINE / f"{name}.txt").read_text())
    missing = set(CATALOG.probes[name].facts) - set(facts)
    assert not missing, f"{name} does not report {sorted(missing)}"
    ctx = context()
    findings = probe.check("gpu001", facts, ctx) + probe.check_fleet({"gpu001": facts,
                                                                     "gpu002": facts}, ctx)
    assert [f.code for f in findings if f.severity != "info"] == []


@pytest.mark.parametrize("name", IMPLEMENTED)
def test_probe_raises_only_catalog_codes(name: str) -> None:
    # Read the module's source for code literals passed to finding(): each must be the probe's
    # own catalog code or a common one.
    import inspect
    import re

    source = inspect.getsource(importlib.import_module(REGISTRY[name]))
    allowed = set(CATALOG.probes[name].codes) | {c.code for c in CATALOG.codes.values()
                                                  if c.probe == "common"}
    used = set(re.findall(r"finding\(\s*\"([a-z0-9-]+)\"", source))
    assert used <= allowed, f"{name} raises codes outside its catalog entry: {used - allowed}"


def test_categories_name_known_codes_and_the_checks_read_them() -> None:
    # The placement check and the history read code groups from the catalog, not from tuples.
    catalog = load_catalog()
    assert set(catalog.categories) >= {"not-evidence", "placement", "version", "configuration"}
    for name, codes in catalog.categories.items():
        assert codes and all(c in catalog.codes for c in codes), name
    assert "host-access-failed" in catalog.category("not-evidence")


def test_a_category_naming_an_unknown_code_is_refused(tmp_path) -> None:
    from probes.catalog import CATALOG_FILE

    text = CATALOG_FILE.read_text(encoding="utf-8").replace(
        "codes: [job-spans-leaves, leaf-concentration]", "codes: [job-spans-leaves, no-such]")
    bad = tmp_path / "catalog.yaml"
    bad.write_text(text, encoding="utf-8")
    with pytest.raises(ValueError, match="no-such"):
        load_catalog(bad)
