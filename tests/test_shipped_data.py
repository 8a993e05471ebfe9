"""The shipped data files come from the start cache exactly as the YAML loader reads them, and a
changed byte is read again."""

from __future__ import annotations

from pathlib import Path

import pytest

from assistant import yamlfile
from probes import shipped
from probes.base import THRESHOLDS_FILE
from probes.catalog import CATALOG_FILE


@pytest.fixture(autouse=True)
def own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DIAG_CACHE_DIR", str(tmp_path / "cache"))


@pytest.mark.parametrize("path", [CATALOG_FILE, THRESHOLDS_FILE])
def test_cached_data_equals_the_loaders(path: Path, tmp_path: Path) -> None:
    first = shipped.data(path)
    assert list((tmp_path / "cache" / "shipped-yaml").iterdir())  # stored...
    assert shipped.data(path) == first == yamlfile.load_file(path).data  # ...and read back


def test_a_changed_byte_is_read_again(tmp_path: Path) -> None:
    path = tmp_path / "data.yaml"
    path.write_text("limit: 10\n")
    assert shipped.data(path) == {"limit": 10}
    path.write_text("limit: 12\n")  # same size, written just now
    assert shipped.data(path) == {"limit": 12}
