"""SSH authentication: which keys diag offers, in what order, and why a login failed.

Public keys only, like a batch ``ssh -o BatchMode=yes``: a probe at 3 a.m. must never stop at a
password prompt. Keys are offered as OpenSSH would: the host's identity file (inventory or
ssh_config), then ssh-agent keys, then the default ``~/.ssh/id_*`` keys. A key that cannot be
used (missing, encrypted, unreadable) is not an error by itself — it becomes part of the
one-line reason when no key works, so the operator sees *why* instead of "auth failed".
"""

from __future__ import annotations

import getpass
import os
import threading

import paramiko

from assistant.fleet.inventory import HostSpec
from assistant.fleet.transport import HostFailure

DEFAULT_KEY_NAMES = ("id_ed25519", "id_ecdsa", "id_rsa")


class Authenticator:
    """Public-key authentication for the connections of one transport (thread-safe).

    *use_agent* / *look_for_keys* allow ssh-agent keys and the default ``~/.ssh/id_*`` keys,
    tried after the host's identity file; *auth_timeout* is only named in the message when the
    server does not answer (paramiko enforces it on the connection).
    """

    def __init__(self, *, use_agent: bool, look_for_keys: bool, auth_timeout: float) -> None:
        self.use_agent = use_agent
        self.look_for_keys = look_for_keys
        self.auth_timeout = auth_timeout
        self._lock = threading.Lock()
        self._keys: dict[str, paramiko.PKey | str] = {}  # path -> key, or why it cannot load

    def _load_key(self, path: str) -> paramiko.PKey | str:
        """Load (once per transport) a private key, or return why it cannot be used."""
        with self._lock:
            cached = self._keys.get(path)
        if cached is not None:
            return cached
        loaded: paramiko.PKey | str
        try:
            loaded = paramiko.PKey.from_path(path)
        except FileNotFoundError:
            loaded = f"{path}: no such file"
        except paramiko.PasswordRequiredException:
            loaded = f"{path}: encrypted (load it into ssh-agent)"
        except (OSError, ValueError, TypeError, paramiko.SSHException) as exc:
            loaded = f"{path}: cannot load ({exc})"
        with self._lock:
            self._keys[path] = loaded
        return loaded

    def authenticate(self, conn: paramiko.Transport, spec: HostSpec,
                     cancel: threading.Event | None) -> None:
        """Log in on *conn* as the host's user; HostFailure (``auth-failed``, ``timeout`` or
        ``cancelled``) if no key is accepted."""
        user = spec.user or getpass.getuser()
        candidates: list[tuple[str, paramiko.PKey]] = []
        problems: list[str] = []
        paths: list[str] = []
        if spec.identity_file:
            paths.append(os.path.expanduser(spec.identity_file))
        agent: paramiko.Agent | None = None
        try:
            for path in paths:
                key = self._load_key(path)
                (problems.append(key) if isinstance(key, str)
                 else candidates.append((os.path.basename(path), key)))
            if self.use_agent and os.environ.get("SSH_AUTH_SOCK"):
                try:
                    agent = paramiko.Agent()
                    candidates.extend(("agent key", key) for key in agent.get_keys())
                except paramiko.SSHException as exc:
                    problems.append(f"ssh-agent: {exc}")
            if self.look_for_keys:
                for key_name in DEFAULT_KEY_NAMES:
                    path = os.path.expanduser(f"~/.ssh/{key_name}")
                    if path not in paths and os.path.isfile(path):
                        key = self._load_key(path)
                        if not isinstance(key, str):
                            candidates.append((key_name, key))
            if not candidates:
                detail = f" ({'; '.join(problems)})" if problems else ""
                raise HostFailure("auth-failed", f"no usable SSH key for user {user}: no "
                                  f"identity file, agent key or ~/.ssh/id_* key{detail}")
            tried = 0
            for _label, key in candidates:
                if cancel is not None and cancel.is_set():
                    raise HostFailure("cancelled", "cancelled")
                tried += 1
                try:
                    conn.auth_publickey(user, key)
                except paramiko.BadAuthenticationType as exc:
                    raise HostFailure("auth-failed", "server does not accept public keys "
                                      f"(allows {', '.join(exc.allowed_types)})") from None
                except paramiko.AuthenticationException as exc:
                    if "timeout" in str(exc).lower():
                        raise HostFailure("timeout", f"no answer to authentication in "
                                          f"{self.auth_timeout:g}s") from None
                    if not conn.is_active():
                        raise HostFailure("auth-failed", f"user {user}: server closed the "
                                          f"connection after {tried} key(s)") from None
                    continue
                except paramiko.SSHException:  # e.g. the agent refused to sign
                    continue
                if conn.is_authenticated():
                    return
            detail = f"; {'; '.join(problems)}" if problems else ""
            raise HostFailure("auth-failed", f"public key refused for user {user} "
                              f"({tried} key(s) tried{detail})")
        finally:
            if agent is not None:
                agent.close()
