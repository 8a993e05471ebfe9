"""A loopback sshd fleet that answers diag's probes with recorded outputs (for the TUI's SSH
walk test and ``bench/tui.py``).

Same approach as ``tests/fleet/test_fleet_run_e2e.py``: every host is a real sshd
(``tests/fleet/sshfleet.py``) whose ForceCommand reads the probe name from the first line of
diag's script (``# diag probe: NAME``) and prints the recorded output for that host, or the
healthy baseline. So the walk goes through real SSH — connections, fan-out, channel reuse —
and sees a real incident.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path

from assistant.locations import fixtures_dir
from tests.fleet import sshfleet

XID_OUTPUT = (fixtures_dir() / "scenarios" / "hang-xid79-fallen-off-bus" / "outputs" /
              "gpu-gpu003-xid79.txt")

REPLAY = r"""#!/bin/sh
# Answer a diag probe script with the recorded output for this host (or the healthy baseline).
probe=$(printf '%s\n' "$SSH_ORIGINAL_COMMAND" | sed -n 's/^# diag probe: \([a-z-]*\).*/\1/p')
root=$(dirname "$0")
if [ -z "$probe" ]; then
  # Not a probe: an action (a drain). Run it as a host without the Slurm client would: with
  # only the host's own fake tools and a shell, setsid and timeout (diag's remote wrapper) on
  # PATH, `scontrol` is absent and the action fails.
  PATH="${PATH%%:*}:$root/tools" exec /bin/sh -c "$SSH_ORIGINAL_COMMAND"
fi
for f in "$root/hosts/$DIAG_FLEET_HOST/$probe.txt" "$root/baseline/$probe.txt"; do
  [ -f "$f" ] && exec cat "$f"
done
echo "no recording for probe '$probe'" >&2
exit 127
"""


def sweep_output(per_probe: Mapping[str, str]) -> str:
    """What a host prints for the evidence sweep (probes/sweep.py): each component's recorded
    output, or its healthy baseline."""
    from probes.catalog import load_catalog, sweep_components
    from probes.sweep import Part, compose

    baseline = fixtures_dir() / "scenarios" / "_baseline"
    parts = []
    for name in sweep_components(load_catalog()):
        text = per_probe.get(name)
        if text is None and (baseline / f"{name}.txt").is_file():
            text = (baseline / f"{name}.txt").read_text()
        if text is not None:
            parts.append((name, Part(text, 0)))
    return compose(parts)


def unavailable_reason() -> str | None:
    return sshfleet.unavailable_reason()


@contextlib.contextmanager
def replay_fleet(hosts: int | list[str], outputs: Mapping[str, Mapping[str, str]] | None = None,
                 **fleet_options: object) -> Iterator[sshfleet.SSHFleet]:
    """A started fleet; *outputs* maps host -> probe -> recorded output."""
    replay = Path(tempfile.mkdtemp(prefix="diag-tui-replay-"))
    replay.chmod(0o755)  # read by the fleet's test user
    shutil.copytree(fixtures_dir() / "scenarios" / "_baseline", replay / "baseline")
    names = ([f"node{i:03d}" for i in range(1, hosts + 1)] if isinstance(hosts, int)
             else list(hosts))
    for host in names:
        per_probe = dict((outputs or {}).get(host, {}))
        (replay / "hosts" / host).mkdir(parents=True)
        for probe, text in per_probe.items():
            (replay / "hosts" / host / f"{probe}.txt").write_text(text)
        # the evidence sweep's answer: every component's recording, else its baseline
        (replay / "hosts" / host / "sweep.txt").write_text(sweep_output(per_probe))
    (replay / "tools").mkdir()
    for tool in ("sh", "setsid", "timeout"):
        found = shutil.which(tool)
        if found:
            (replay / "tools" / tool).symlink_to(found)
    script = replay / "replay.sh"
    script.write_text(REPLAY)
    for path in [replay, *replay.rglob("*")]:
        if path.is_symlink():
            continue
        path.chmod(0o755 if path.is_dir() or path.suffix == ".sh" else 0o644)
    try:
        with sshfleet.SSHFleet(names, force_command={h: str(script) for h in names},
                               **fleet_options) as fleet:  # type: ignore[arg-type]
            yield fleet
    finally:
        shutil.rmtree(replay, ignore_errors=True)
