"""YAML loading that remembers where every value came from — for every file a user writes.

Runbook, inventory and scenario authors need errors that point at a line, and PyYAML's plain
loader forgets positions and silently keeps the last of two duplicate keys. Here the composed
node tree is walked by hand: each value's (line, column) is recorded under its path, and a
duplicate key is an error. It sits below every layer that reads a user's file (fleet, runbook)
so they all share it.

It also bounds what a file can cost, because a file can be hostile (a runbook from a pull
request, an inventory from a shared drive): at most ``MAX_BYTES`` are read, nesting deeper than
``MAX_DEPTH`` is refused while the parser is still at the first levels (PyYAML's composer
recurses once per level, and 20,000 ``[`` ended in ``RecursionError``), and aliases may not
expand to more than ``MAX_VALUES`` values (a "billion laughs" file of nine nested anchors
composes into a few dozen nodes, but converting it allocated gigabytes). Both are measured on
the composed node graph before anything is converted, so a refusal costs milliseconds and no
memory. A file that is not UTF-8 is refused naming the line and column of the first bad byte,
and an empty file is called empty.
"""

from __future__ import annotations

import difflib
import gc
import importlib
import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import yaml

# A runbook is ~20 kB, an inventory of 4,096 hosts ~300 kB: 4 MiB leaves room, and bounds what
# a file can cost (about 0.25 s per MiB with libyaml, four times that with PyYAML's Python
# scanner, which is used only where libyaml is missing).
MAX_BYTES = 4 * 1024 * 1024
# The deepest shipped file (a runbook's nested conditions) is 9 levels deep.
MAX_DEPTH = 64
# Values after alias expansion; the biggest shipped file has ~2,000.
MAX_VALUES = 200_000

Path = tuple[str | int, ...]


@dataclass(frozen=True)
class Mark:
    line: int  # 1-based
    column: int  # 1-based


@dataclass
class Located:
    """A YAML document as plain Python data plus the position of every path in it."""

    data: Any
    # (line, column) per path, plain tuples: a large document records 100,000s of them, and
    # only the few an error names become a Mark.
    marks: dict[Path, tuple[int, int]] = field(default_factory=dict)
    empty: bool = False  # no YAML document at all (an empty file, or only comments)

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


def _mark(node: yaml.Node | yaml.Event | yaml.Mark) -> Mark:
    mark = node if isinstance(node, yaml.Mark) else node.start_mark
    return Mark(mark.line + 1, mark.column + 1) if mark is not None else Mark(1, 1)


_CParser: Any
try:  # PyYAML built with libyaml (its wheels are)
    _CParser = importlib.import_module("yaml._yaml").CParser
except ImportError:  # a PyYAML built from source without libyaml: its Python scanner
    _CParser = None


def _too_deep(what: str, mark: Mark) -> YamlError:
    """The one refusal for nesting past MAX_DEPTH, whichever parser or bound noticed it."""
    return YamlError(f"{what}nested deeper than {MAX_DEPTH} levels: refused (no diag file "
                     "needs that; a file built to exhaust the parser does)", mark)


class _Bounded:
    """The composer's half of the bounds: nesting deeper than MAX_DEPTH is refused as nodes
    are composed, before PyYAML's composer (one Python call per level) reaches Python's
    recursion limit."""

    _depth = 0

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise _too_deep("", _mark(self.peek_event()))  # type: ignore[attr-defined]
            return super().compose_node(parent, index)  # type: ignore[misc]
        finally:
            self._depth -= 1


class _BoundedLoader(_Bounded, yaml.SafeLoader):
    """PyYAML's pure-Python safe loader, where libyaml is missing. Its scanner is bounded too:
    it keeps a possible key open for every ``[`` and rescans them all on each new one (20,000
    brackets cost it half a second, quadratically more beyond), so brackets deeper than
    MAX_DEPTH are refused as they are scanned."""

    def fetch_flow_collection_start(self, TokenClass: Any) -> None:  # PyYAML's signature
        if self.flow_level >= MAX_DEPTH:
            raise _too_deep("brackets ", _mark(self.get_mark()))
        super().fetch_flow_collection_start(TokenClass)


if _CParser is not None:
    class _FastLoader(_Bounded, yaml.composer.Composer, _CParser, yaml.resolver.Resolver):
        """libyaml scans and parses (C: ~20 times faster than PyYAML's Python scanner, which
        was nearly all of a large file's cost), PyYAML's Python composer builds the nodes
        from libyaml's events, so the depth bound above still applies as each node is
        composed, and marks, tags and errors are PyYAML's own types."""

        def __init__(self, stream: str) -> None:
            _CParser.__init__(self, stream)
            yaml.composer.Composer.__init__(self)
            yaml.resolver.Resolver.__init__(self)


def _loader(text: str) -> Any:
    return _FastLoader(text) if _CParser is not None else _BoundedLoader(text)


def load(text: str) -> Located:
    """Parse one YAML document; raise YamlError with a position on any problem, including a
    document over the size, depth or alias-expansion limits."""
    if len(text) > MAX_BYTES:
        raise YamlError(f"larger than {MAX_BYTES // (1024 * 1024)} MiB: refused", Mark(1, 1))
    with paused_gc():
        return _load(text)


def _load(text: str) -> Located:
    loader = _loader(text)
    try:
        root = loader.get_single_node()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        pos = Mark(mark.line + 1, mark.column + 1) if mark else Mark(1, 1)
        if "maximum nesting depth" in str(exc.problem):  # libyaml's own bound (1,000 levels)
            raise _too_deep("", pos) from None
        if exc.context_mark is not None and "flow" in str(exc.context):
            # libyaml marks where it gave up (often the next line, deep inside what it took
            # for the collection); the mistake is almost always the bracket left open.
            context = exc.context_mark
            raise YamlError(f"YAML syntax: {exc.problem} {exc.context} (is a bracket left "
                            "open?)", Mark(context.line + 1, context.column + 1)) from None
        raise YamlError(f"YAML syntax: {exc.problem or exc}", pos) from None
    except yaml.YAMLError as exc:  # e.g. several documents in one file
        raise YamlError(f"YAML syntax: {exc}", Mark(1, 1)) from None
    finally:
        loader.dispose()
    if root is None:
        return Located(None, empty=True)
    _measure(root, {}, set())
    located = Located(None)
    located.data = _convert(root, (), located.marks)
    return located


def _measure(node: yaml.Node, memo: dict[int, tuple[int, int]],
             active: set[int]) -> tuple[int, int]:
    """(values, depth) of *node* once its aliases are expanded; raise YamlError past the
    limits, or for an alias inside the value it names (``&a [*a]``: infinitely deep).

    Memoized by node identity: an alias is the very node it names, so a billion-laughs file
    is measured in a few dozen steps. The recursion follows the composed tree, which the
    loader already bounded to MAX_DEPTH."""
    key = id(node)
    if key in memo:
        return memo[key]
    if key in active:
        raise YamlError("an alias refers to the value that contains it (an endless value)",
                        _mark(node))
    if isinstance(node, yaml.ScalarNode):
        return memo.setdefault(key, (1, 1))
    children: list[yaml.Node] = (
        [part for pair in node.value for part in pair] if isinstance(node, yaml.MappingNode)
        else list(node.value))
    active.add(key)
    values, depth = 1, 0
    for child in children:
        child_values, child_depth = _measure(child, memo, active)
        values += child_values
        depth = max(depth, child_depth)
        if values > MAX_VALUES:
            raise YamlError(f"aliases expand to more than {MAX_VALUES:,} values: refused (a "
                            "'billion laughs' file?)", _mark(node))
    if depth + 1 > MAX_DEPTH:
        raise YamlError(f"aliases expand to values nested deeper than {MAX_DEPTH} levels: "
                        "refused", _mark(node))
    active.discard(key)
    return memo.setdefault(key, (values, depth + 1))


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


def read_text(path: str | os.PathLike[str]) -> str:
    """A user's file as text: at most MAX_BYTES, UTF-8, or YamlFileError naming the line and
    column of the first byte that is not UTF-8."""
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_BYTES + 1)
    except FileNotFoundError:
        raise YamlFileError(path, "no such file") from None
    except IsADirectoryError:
        raise YamlFileError(path, "is a directory, not a file") from None
    except OSError as exc:
        raise YamlFileError(path, f"cannot read: {exc.strerror or exc}") from None
    if len(data) > MAX_BYTES:
        raise YamlFileError(path, f"larger than {MAX_BYTES // (1024 * 1024)} MiB: refused "
                            "(no diag file is that big)")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        start = data.rfind(b"\n", 0, exc.start) + 1
        line = data.count(b"\n", 0, exc.start) + 1
        column = len(data[start:exc.start].decode("utf-8", errors="replace")) + 1
        raise YamlFileError(path, f"not UTF-8: byte 0x{data[exc.start]:02x} cannot be decoded "
                            "(save the file as UTF-8)", Mark(line, column)) from None


def load_file(path: str | os.PathLike[str], *, allow_empty: bool = False) -> Located:
    """Read and parse a user's YAML file (thresholds, baselines, KB front matter, ...): the one
    loader every file diag reads goes through, so each gets the same checks and errors. An
    empty file (no YAML document) is an error unless *allow_empty*."""
    text = read_text(path)
    try:
        located = load(text)
    except YamlError as exc:
        raise YamlFileError(path, exc.message, exc.mark) from None
    if located.empty and not allow_empty:
        raise YamlFileError(path, empty_message(text))
    return located


def empty_message(text: str) -> str:
    """What to call a file with no YAML document in it."""
    return "the file is empty" if not text.strip() else "the file has no YAML in it (only comments)"


def did_you_mean(name: object, known: Iterable[str]) -> str:
    """`` (did you mean 'drain-node'?)`` for the known names closest to a misspelt *name*, or
    "" when none is close: one suggestion rather than a list of everything that exists."""
    close = difflib.get_close_matches(str(name), sorted(set(known)), n=2, cutoff=0.75)
    if not close:
        return ""
    return f" (did you mean {' or '.join(repr(c) for c in close)}?)"
