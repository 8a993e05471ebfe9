"""YAML loading that remembers where every value came from — for every file a user writes.

Runbook, inventory and scenario authors need errors that point at a line, and PyYAML's plain
loader forgets positions and silently keeps the last of two duplicate keys. Here the composed
node tree is walked by hand: each value's (line, column) is recorded under its path, and a
duplicate key is an error. It sits below every layer that reads a user's file (fleet, runbook)
so they all share it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import yaml

Path = tuple[str | int, ...]


@dataclass(frozen=True)
class Mark:
    line: int  # 1-based
    column: int  # 1-based


@dataclass
class Located:
    """A YAML document as plain Python data plus the position of every path in it."""

    data: Any
    marks: dict[Path, Mark] = field(default_factory=dict)

    def mark(self, path: Path) -> Mark:
        """Where *path* starts: its key's line for a mapping entry (a block mapping's value
        starts a line later), else the value itself, else its closest ancestor."""
        while path:
            for candidate in ((*path, "__key__"), path):
                if candidate in self.marks:
                    return self.marks[candidate]
            path = path[:-1]
        return self.marks.get((), Mark(1, 1))


class YamlError(Exception):
    """A document that is not valid YAML, or has a duplicate key."""

    def __init__(self, message: str, mark: Mark, path: Path = ()) -> None:
        super().__init__(message)
        self.message = message
        self.mark = mark
        self.path = path


def _mark(node: yaml.Node) -> Mark:
    return Mark(node.start_mark.line + 1, node.start_mark.column + 1)


def load(text: str) -> Located:
    """Parse one YAML document; raise YamlError with a position on any problem."""
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        pos = Mark(mark.line + 1, mark.column + 1) if mark else Mark(1, 1)
        raise YamlError(f"YAML syntax: {exc.problem or exc}", pos) from None
    except yaml.YAMLError as exc:  # e.g. several documents in one file
        raise YamlError(f"YAML syntax: {exc}", Mark(1, 1)) from None
    located = Located(None)
    if root is None:
        return located
    located.data = _convert(root, (), located.marks)
    return located


_constructor = yaml.SafeLoader(  # only used to turn scalars into ints, bools, floats, ...
    ""
)


def _convert(node: yaml.Node, path: Path, marks: dict[Path, Mark]) -> Any:
    marks[path] = _mark(node)
    if isinstance(node, yaml.MappingNode):
        result: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                raise YamlError("mapping keys must be plain scalars", _mark(key_node), path)
            key = _constructor.construct_object(key_node)
            if key_node.tag == "tag:yaml.org,2002:merge":
                raise YamlError("merge keys (<<) are not supported", _mark(key_node), path)
            if not isinstance(key, str):
                key = str(key)
            key_path = (*path, key, "__key__")
            if key in result:
                first = marks[key_path]
                raise YamlError(
                    f"duplicate key {key!r} (first defined at line {first.line})",
                    _mark(key_node),
                    (*path, key),
                )
            marks[key_path] = _mark(key_node)
            result[key] = _convert(value_node, (*path, key), marks)
        return result
    if isinstance(node, yaml.SequenceNode):
        return [_convert(item, (*path, i), marks) for i, item in enumerate(node.value)]
    value = _constructor.construct_object(node)
    # YAML 1.1 turns on/off/yes/no into booleans; runbook choice ids like `yes` must stay text
    # when written unquoted, so only a literal true/false becomes a bool.
    if isinstance(value, bool) and isinstance(node, yaml.ScalarNode) and node.style is None \
            and node.value.lower() not in (
        "true",
        "false",
    ):
        return node.value
    return value


class YamlFileError(ValueError):
    """A user's YAML file that cannot be read or parsed; ``str()`` is ``FILE:LINE:COL: what``."""

    def __init__(self, path: str | os.PathLike[str], message: str,
                 mark: Mark | None = None) -> None:
        self.path = str(path)
        self.message = message
        self.mark = mark
        where = f"{self.path}:{mark.line}:{mark.column}" if mark else self.path
        super().__init__(f"{where}: {message}")


def load_file(path: str | os.PathLike[str]) -> Located:
    """Read and parse a user's YAML file (thresholds, baselines, KB front matter, ...): the one
    loader every file diag reads goes through, so each gets the same checks and errors."""
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except FileNotFoundError:
        raise YamlFileError(path, "no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise YamlFileError(path, f"cannot read: {exc}") from None
    try:
        return load(text)
    except YamlError as exc:
        raise YamlFileError(path, exc.message, exc.mark) from None
