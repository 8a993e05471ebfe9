"""Host keys accepted during a walk, recorded with the session that accepted them.

``--accept-new-host-keys`` turns an unknown key into a trusted one: that decision belongs in the
incident record (which host, which fingerprint, into which file, by whom), not only in a
known_hosts file that gets edited later. The transport's policy (``fleet.hostkeys.KnownHosts``)
keeps what it accepted in ``accepted``; this listener writes new ones at each walk event and at
``flush()``, in their own short transaction — separate from the step recorder, so neither
waits for the other, and a store that refuses the write is retried like a step.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import duckdb

from assistant.runbook import events as ev

from .base import Connection, StoreError, insert_rows, now_utc
from .db import Store, current_operator


def insert_host_keys(con: Connection, session_id: str, keys: Iterable[Any],
                     operator: str) -> None:
    """One row per accepted key (objects with host, name, key_type, fingerprint,
    known_hosts: ``fleet.hostkeys.AcceptedKey``)."""
    now = now_utc()
    insert_rows(con, "host_keys", [
        ("session_id", "VARCHAR"), ("ts", "TIMESTAMP"), ("host", "VARCHAR"), ("name", "VARCHAR"),
        ("key_type", "VARCHAR"), ("fingerprint", "VARCHAR"), ("known_hosts", "VARCHAR"),
        ("operator", "VARCHAR")],
        [[session_id, now, k.host, k.name, k.key_type, k.fingerprint, k.known_hosts, operator]
         for k in keys])


class HostKeyRecorder:
    """A walk listener writing the keys the *policies* accepted since the last write."""

    def __init__(self, store: Store, session_id: str, policies: Sequence[Any], *,
                 operator: str | None = None,
                 on_error: Callable[[Exception], None] | None = None) -> None:
        self.store = store
        self.session_id = session_id
        self.policies = list(policies)
        self.operator = operator or current_operator()
        self.on_error = on_error
        self.written = [0] * len(self.policies)  # keys of each policy written so far
        self._lock = threading.Lock()

    def __call__(self, event: object) -> None:
        # at the end of each step, on the walk's thread (probe events come from the fan-out's
        # workers, which must not wait for the store)
        if isinstance(event, ev.StepFinished):
            self.flush()

    def flush(self) -> bool:
        """Write keys not written yet; True when none is left."""
        with self._lock:
            return self._flush()

    def _flush(self) -> bool:
        counts = [len(policy.accepted) for policy in self.policies]
        new = [key for policy, done, count in zip(self.policies, self.written, counts,
                                                  strict=True)
               for key in policy.accepted[done:count]]
        if not new:
            return True
        try:
            self.store.write(lambda con: insert_host_keys(con, self.session_id, new,
                                                          self.operator))
        except (StoreError, duckdb.Error, OSError) as exc:
            if self.on_error is not None:
                self.on_error(exc)
            return False
        self.written = counts
        return True
