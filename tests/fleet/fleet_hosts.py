"""The shared loopback fleet of the fleet tests: which hosts are healthy, slow, garbled or dead."""

from __future__ import annotations

# 27 healthy hosts, one whose nvidia-smi hangs, one that prints garbage, and three broken
# servers: 32 in all, the size of the fan-out test.
HEALTHY = [f"node{i:03d}" for i in range(1, 28)]
SLOW, GARBAGE = "slow01", "garbage01"
DEAD, MUTE, STALL = "dead01", "mute01", "stall01"
FAULTY = {DEAD: "refused", MUTE: "no-banner", STALL: "stall-after-banner"}
TOOLS = {
    SLOW: {"nvidia-smi": "sleep 20"},
    GARBAGE: {"nvidia-smi": "head -c 2000 /dev/urandom; printf '\\377\\376 not utf-8\\n'"},
}
