"""stdout that cannot be written (issue 27 item 7): ``diag ... > /dev/full`` said
``internal error: OSError`` (or, when the output was small enough to sit in the buffer until the
end, exited 120 with Python's "Exception ignored" lines); it says one plain line and exits 2. A
reader that closed the pipe (``diag ... | head -1``) is the usual way to stop reading: quiet.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

from assistant.cli import main

ROOT = Path(__file__).resolve().parent.parent
FULL = "diag: cannot write the output: No space left on device"


def test_a_full_disk_on_stdout_is_one_plain_line() -> None:
    """As the operator meets it: a buffered stdout, so the write fails when diag flushes at
    the end (``PYTHONUNBUFFERED``, which the test environment may set, is taken away)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    with open("/dev/full", "w") as full:
        result = subprocess.run([sys.executable, "-m", "assistant.cli", "runbooks", "list"],
                                stdout=full, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                                env=env, timeout=60)
    assert result.stderr == FULL + "\n"
    assert result.returncode == 2


def test_a_write_that_fails_mid_command_is_the_same_line(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    with open("/dev/full", "w", buffering=1) as full:  # line-buffered: the first line fails
        monkeypatch.setattr(sys, "stdout", full)
        code = main(["runbooks", "list", "--json"])
    assert (code, capsys.readouterr().err) == (2, FULL + "\n")


class _ClosedPipe(io.TextIOBase):
    def write(self, text: str) -> int:
        raise BrokenPipeError(32, "Broken pipe")

    def flush(self) -> None:
        raise BrokenPipeError(32, "Broken pipe")


def test_a_closed_pipe_stays_quiet(monkeypatch: pytest.MonkeyPatch,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(sys, "stdout", _ClosedPipe())
    code = main(["runbooks", "list", "--json"])
    assert (code, capsys.readouterr().err) == (0, "")


def test_a_reader_that_went_away_says_nothing() -> None:
    """``diag ... | true``: the reader is gone before diag writes a byte (a pipe of its own,
    its read end closed at once: every write is EPIPE); nothing on stderr, exit 0."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    read, write = os.pipe()
    os.close(read)
    try:
        result = subprocess.run([sys.executable, "-m", "assistant.cli", "runbooks", "show",
                                 "hang"], stdout=write, stderr=subprocess.PIPE, cwd=ROOT,
                                env=env, timeout=60)
    finally:
        os.close(write)
    assert (result.returncode, result.stderr) == (0, b"")
