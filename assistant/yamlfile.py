"""YAML loading that remembers where every value came from — for every file a user writes.

Runbook, inventory and scenario authors need errors that point at a line, and PyYAML's plain
loader forgets positions and silently keeps the last of two duplicate keys. Here the composed
node tree is walked by hand: each value's (line, column) is recorded under its path, and a
duplicate key is an error. It sits below every layer that reads a user's file (fleet, runbook)
so they all share it.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import yaml

Path = tuple[str | int, ...]


class Mark(NamedTuple):
    """A position (a tuple: a document records one per value, and a large one has 100,000s)."""

    line: int  # 1-based
    column: int  # 1-based


@dataclass
class Located:
    """A YAML document as plain Python data plus the position of every path in it."""

    data: Any
    # (line, column) per path, plain tuples: a large document records 100,000s of them, and
    # only the few an error names become a Mark.
    marks: dict[Path, tuple[int, int]] = field(default_factory=dict)

    def mark(self, path: Path) -> Mark:
        """Where *path* starts: its key's line for a mapping entry (a block mapping's value
        starts a line later), else the value itself, else its closest ancestor."""
        while path:
            for candidate in ((*path, "__key__"), path):
                if candidate in self.marks:
                    return Mark(*self.marks[candidate])
            path = path[:-1]
        return Mark(*self.marks.get((), (1, 1)))


class YamlError(Exception):
    """A document that is not valid YAML, or has a duplicate key."""

    def __init__(self, message: str, mark: Mark, path: Path = ()) -> None:
        super().__init__(message)
        self.message = message
        self.mark = mark
        self.path = path


def _mark(node: yaml.Node) -> Mark:
    start = node.start_mark
    return Mark(start.line + 1, start.column + 1)


# libyaml's parser (C) composes the same node tree with the same marks, about ten times faster
# than PyYAML's pure-Python one: a 20,000-node runbook spent most of its validation here.
_COMPOSER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@contextmanager
def paused_gc() -> Iterator[None]:
    """No cyclic garbage collection inside: building a large document's tree allocates
    hundreds of thousands of objects that all survive, and each collection walks all of them
    again (a 20,000-node runbook's YAML took five times longer with the collector running).
    Nothing built here is cyclic garbage; the collector runs again on the way out."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def load(text: str) -> Located:
    """Parse one YAML document; raise YamlError with a position on any problem."""
    with paused_gc():
        try:
            root = yaml.compose(text, Loader=_COMPOSER)
        except yaml.YAMLError:
            root = _compose_for_error(text)
        located = Located(None)
        if root is None:
            return located
        located.data = _convert(root, (), located.marks)
        return located


def _compose_for_error(text: str) -> yaml.Node | None:
    """A document libyaml refused, parsed again by PyYAML for its error: it names the token it
    did not expect where the mistake is (libyaml points a line later, at what it read next)."""
    try:
        return yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        pos = Mark(mark.line + 1, mark.column + 1) if mark else Mark(1, 1)
        raise YamlError(f"YAML syntax: {exc.problem or exc}", pos) from None
    except yaml.YAMLError as exc:  # e.g. several documents in one file
        raise YamlError(f"YAML syntax: {exc}", Mark(1, 1)) from None


_constructor = yaml.SafeLoader(  # only used to turn scalars into ints, bools, floats, ...
    ""
)


_STR = "tag:yaml.org,2002:str"


def _scalar(node: yaml.Node) -> Any:
    """A scalar's value: text as it is (most of a document, and what the constructor would
    return), the rest through PyYAML's safe constructor, which is told to forget the node
    afterwards (it would otherwise keep every node of every document alive)."""
    if node.tag == _STR and isinstance(node, yaml.ScalarNode):
        return node.value
    try:
        return _constructor.construct_object(node)
    finally:
        _constructor.constructed_objects.clear()


def _convert(node: yaml.Node, path: Path, marks: dict[Path, tuple[int, int]]) -> Any:
    start = node.start_mark
    marks[path] = (start.line + 1, start.column + 1)
    if isinstance(node, yaml.MappingNode):
        result: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                raise YamlError("mapping keys must be plain scalars", _mark(key_node), path)
            key = _scalar(key_node)
            if key_node.tag == "tag:yaml.org,2002:merge":
                raise YamlError("merge keys (<<) are not supported", _mark(key_node), path)
            if not isinstance(key, str):
                key = str(key)
            key_path = (*path, key, "__key__")
            if key in result:
                first = marks[key_path]
                raise YamlError(
                    f"duplicate key {key!r} (first defined at line {first[0]})",
                    _mark(key_node),
                    (*path, key),
                )
            start = key_node.start_mark
            marks[key_path] = (start.line + 1, start.column + 1)
            result[key] = _convert(value_node, (*path, key), marks)
        return result
    if isinstance(node, yaml.SequenceNode):
        return [_convert(item, (*path, i), marks) for i, item in enumerate(node.value)]
    value = _scalar(node)
    # YAML 1.1 turns on/off/yes/no into booleans; runbook choice ids like `yes` must stay text
    # when written unquoted, so only a literal true/false becomes a bool.
    # (A plain scalar's style is None from PyYAML's parser, "" from libyaml's.)
    if isinstance(value, bool) and isinstance(node, yaml.ScalarNode) and not node.style \
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
