"""The data files shipped with the probes (catalog, thresholds, XID catalog, acceptance criteria,
NCCL variables), parsed once per content instead of once per start.

Every ``diag run`` read them with the line-numbered YAML loader (``assistant.yamlfile``), which
is what a user's file needs for its error messages but costs ~0.3 s of CPU per start for these
files, which only change with diag itself. Their plain data is kept in the start cache
(``assistant.cache``) under a key of the file's bytes and the loader's own code: a changed byte
in either parses it again. A user's own thresholds or criteria file is never read through here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from assistant import cache, yamlfile


def data(path: Path) -> Any:
    """The file's parsed data (plain dicts, lists, strings, numbers)."""
    key = cache.files_key([path, yamlfile.__file__], salt="shipped-yaml")
    return cache.cached_plain("shipped-yaml", key, lambda: yamlfile.load_file(path).data,
                              lambda value: value)
