"""Inventories and name resolution: which machine does ``gpu007`` mean?

Host names come from host expressions (``assistant.fleet.hostexpr``). Each name is resolved,
in order, through the inventory YAML (where a fleet keeps addresses and the rack / leaf / rail
attributes that grouping and correlation need), then the user's OpenSSH ``ssh_config`` (so an
existing ``~/.ssh/config`` keeps working unchanged), then taken as-is.

Every problem with an inventory raises :class:`~assistant.fleet.hostexpr.InventoryError`,
whose ``str()`` is one line naming the file and line — the command line prints it and exits
2, no traceback.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from assistant import yamlfile
from assistant.fleet.hostexpr import InventoryError, check_host_name, expand_part, parse_hop
from probes.hostfold import fold_hosts

DEFAULT_PORT = 22
DEFAULT_SSH_CONFIG = "~/.ssh/config"

# Keys a host entry understands; every other key is an attribute (rack, leaf, rail, ...).
HOST_KEYS = ("address", "port", "user", "identity_file", "proxy_jump")
DEFAULT_KEYS = ("user", "port", "identity_file", "known_hosts", "ssh_config", "proxy_jump")
TOP_KEYS = ("defaults", "hosts")
# Spellings people bring from ssh_config or other tools; an attribute with one of these names
# would silently be ignored for connecting, so it is an error with a hint instead.
_ALIASES = {
    "hostname": "address", "host": "address", "ip": "address", "addr": "address",
    "ansible_host": "address", "identityfile": "identity_file", "identity": "identity_file",
    "key": "identity_file", "key_file": "identity_file", "proxyjump": "proxy_jump",
    "jump": "proxy_jump", "jump_host": "proxy_jump", "username": "user", "ssh_port": "port",
    "knownhosts": "known_hosts", "userknownhostsfile": "known_hosts",
}


@dataclass
class HostSpec:
    """Everything needed to reach one host, after resolution.

    ``user``/``identity_file`` left ``None`` mean "the SSH defaults": the local user name, and
    the agent plus ``~/.ssh/id_*`` keys. ``jumps`` holds the resolved ProxyJump hops, in order,
    filled by :func:`resolve` so a transport need not resolve names itself.
    """

    name: str
    address: str
    port: int = DEFAULT_PORT
    user: str | None = None
    identity_file: str | None = None
    proxy_jump: str | None = None
    attrs: dict[str, Any] = field(default_factory=dict)
    jumps: tuple[HostSpec, ...] = ()
    source: str = "as-is"  # where the spec came from: "inventory FILE:LINE", "ssh_config", ...


@dataclass
class _Entry:
    fields: dict[str, Any]
    attrs: dict[str, Any]
    line: int


@dataclass
class Inventory:
    """A loaded inventory file. Use :func:`resolve` (or :meth:`specs`) to get HostSpecs."""

    path: Path | None
    entries: dict[str, _Entry] = field(default_factory=dict)
    defaults: dict[str, Any] = field(default_factory=dict)
    _specs: dict[str, HostSpec] | None = field(default=None, repr=False, compare=False)

    @property
    def names(self) -> list[str]:
        """Host names in file order."""
        return list(self.entries)

    @property
    def known_hosts(self) -> str | None:
        """The known_hosts file named in ``defaults`` (absolute), or None."""
        return self.defaults.get("known_hosts")

    @property
    def ssh_config(self) -> str | None:
        """The ssh_config file named in ``defaults`` (absolute), or None."""
        return self.defaults.get("ssh_config")

    def attrs(self, name: str) -> dict[str, Any]:
        entry = self.entries.get(name)
        return dict(entry.attrs) if entry else {}

    @property
    def hosts(self) -> dict[str, HostSpec]:
        """Every host of the inventory, resolved (ssh_config included), by name, in file order.

        Computed on first use: it may read the ssh_config, and so raise InventoryError."""
        if self._specs is None:
            self._specs = self.specs()
        return self._specs

    def specs(self, ssh_config_path: str | os.PathLike[str] | None = None) -> dict[str, HostSpec]:
        """Every host of the inventory, resolved, by name."""
        return {spec.name: spec for spec in resolve(self.names, self, ssh_config_path)}


# ------------------------------------------------------------------------------------ loading

def _expand_path(value: str, base: Path | None) -> str:
    """``~`` expanded; a relative path is taken relative to the inventory file, not the cwd,
    so an inventory can ship with its keys and known_hosts next to it."""
    path = Path(os.path.expanduser(value))
    if not path.is_absolute() and base is not None:
        path = base / path
    return str(path)


def _hint(key: str, known: tuple[str, ...]) -> str:
    alias = _ALIASES.get(key.lower().replace("-", "_"))
    if alias:
        return f" (did you mean {alias!r}?)"
    close = difflib.get_close_matches(key, known, n=1, cutoff=0.8)
    return f" (did you mean {close[0]!r}?)" if close else ""


class _Loader:
    """Checks the loaded data (``assistant.yamlfile``: positions kept, duplicate keys refused)
    so every error can name its line."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.base = path.parent
        self.located = yamlfile.Located(None)

    def error(self, message: str, at: yamlfile.Path | None) -> InventoryError:
        line = self.located.mark(at).line if at is not None else None
        return InventoryError(message, self.path, line)

    def mapping(self, at: yamlfile.Path, what: str) -> list[tuple[str, yamlfile.Path]]:
        """The (key, path) pairs of the mapping at *at*; keys are where errors about them
        point (``__key__``)."""
        value = self.value(at)
        if value is None:
            return []
        if not isinstance(value, dict):
            raise self.error(f"{what} must be a mapping", at)
        return [(key, (*at, key)) for key in value]

    def value(self, at: yamlfile.Path) -> Any:
        data = self.located.data
        for part in at:
            data = data[part]
        return data

    def scalar(self, at: yamlfile.Path, what: str) -> Any:
        value = self.value(at)
        if isinstance(value, list):
            if any(isinstance(v, dict | list) for v in value):
                raise self.error(f"{what} must be a value or a list of values", at)
            return value
        if isinstance(value, dict):
            raise self.error(f"{what} must be a value or a list of values, not a mapping", at)
        return value

    def field(self, key: str, at: yamlfile.Path, what: str) -> Any:
        value = self.scalar(at, what)
        if key == "port":
            if isinstance(value, bool) or not isinstance(value, int) or not 0 < value < 65536:
                raise self.error(f"{what}: port must be an integer 1-65535, not {value!r}", at)
            return value
        if not isinstance(value, str) or not value.strip():
            raise self.error(f"{what}: {key} must be a non-empty string, not {value!r}", at)
        value = value.strip()
        if key == "proxy_jump" and value.lower() == "none":  # as in ssh_config: no jump here
            return None
        if key in ("identity_file", "known_hosts", "ssh_config"):
            return _expand_path(value, self.base)
        return value

    def load(self) -> Inventory:
        if not self.path.exists():
            raise InventoryError("no such inventory file", self.path)
        try:
            self.located = yamlfile.load_file(self.path)  # an empty file is called empty
        except yamlfile.YamlFileError as exc:
            raise InventoryError(exc.message, self.path,
                                 exc.mark.line if exc.mark else None) from None
        inventory = Inventory(self.path)
        if self.located.data is None:
            raise InventoryError("no inventory in the file (expected 'hosts:')", self.path)
        sections = {}
        for key, at in self.mapping((), "inventory"):
            if key not in TOP_KEYS:
                raise self.error(f"unknown top-level key {key!r}{_hint(key, TOP_KEYS)}; "
                                 f"expected {', '.join(TOP_KEYS)}", at)
            sections[key] = at
        if "defaults" in sections:
            for key, at in self.mapping(sections["defaults"], "defaults"):
                if key not in DEFAULT_KEYS:
                    raise self.error(f"defaults: unknown key {key!r}{_hint(key, DEFAULT_KEYS)}; "
                                     f"expected one of {', '.join(DEFAULT_KEYS)}", at)
                inventory.defaults[key] = self.field(key, at, "defaults")
        if "hosts" not in sections:
            raise self.error("no 'hosts:' section", ())
        for key, at in self.mapping(sections["hosts"], "hosts"):
            self.host(inventory, key, at)
        if not inventory.entries:
            raise self.error("'hosts:' is empty", sections["hosts"])
        return inventory

    def host(self, inventory: Inventory, key: str, at: yamlfile.Path) -> None:
        # A key may itself be an expression (gpu[001-032]) sharing attributes; the address then
        # defaults to each expanded name.
        try:
            names = expand_part(key, "host name or expression")
        except InventoryError as exc:
            raise self.error(exc.message, at) from None
        if not names:
            raise self.error(f"empty host name {key!r}", at)
        fields: dict[str, Any] = {}
        attrs: dict[str, Any] = {}
        for attr, attr_at in self.mapping(at, f"host {key}"):
            if attr in HOST_KEYS:
                fields[attr] = self.field(attr, attr_at, f"host {key}")
                continue
            hint = _hint(attr, HOST_KEYS)
            if hint:
                raise self.error(f"host {key}: unknown key {attr!r}{hint}", attr_at)
            attrs[attr] = self.scalar(attr_at, f"host {key}: {attr}")
        if "address" in fields and len(names) > 1:
            raise self.error(f"host {key}: one address for {len(names)} hosts; give each host "
                             "its own entry", at)
        line = self.located.mark(at).line
        for name in names:
            if name in inventory.entries:
                first = inventory.entries[name].line
                raise self.error(f"host {name} is defined twice (first at line {first})", at)
            inventory.entries[name] = _Entry(dict(fields), dict(attrs), line)


def load_inventory(path: str | os.PathLike[str]) -> Inventory:
    """Load and check an inventory file; raise InventoryError naming file and line."""
    return _Loader(Path(os.path.expanduser(str(path)))).load()


# --------------------------------------------------------------------------------- resolution

def _load_ssh_config(path: str | None, explicit: bool) -> Any:
    """A paramiko SSHConfig, or None when there is no file (only an error if one was named)."""
    import paramiko  # deferred: `diag --help` must not pay for paramiko

    if path is None:
        return None
    path = os.path.expanduser(path)
    if not os.path.exists(path):
        if explicit:
            raise InventoryError("no such ssh_config file", path)
        return None
    try:
        return paramiko.SSHConfig.from_path(path)
    except (OSError, UnicodeDecodeError, paramiko.SSHException) as exc:
        raise InventoryError(f"cannot read ssh_config: {exc}", path) from None


def _from_ssh_config(config: Any, name: str) -> dict[str, Any]:
    if config is None:
        return {}
    try:
        options = config.lookup(name)
    except Exception as exc:  # Match exec, bad tokens ...: paramiko raises many kinds
        first = next((line for line in str(exc).splitlines() if line.strip()), "")
        raise InventoryError(f"ssh_config lookup for {name} failed: "
                             f"{first or type(exc).__name__}") from None
    fields: dict[str, Any] = {}
    if options.get("hostname") and options["hostname"] != name:
        fields["address"] = options["hostname"]
    if "port" in options:
        try:
            fields["port"] = int(options["port"])
        except ValueError:
            raise InventoryError(f"ssh_config: bad Port {options['port']!r} for {name}") from None
    if "user" in options:
        fields["user"] = options["user"]
    if options.get("identityfile"):
        fields["identity_file"] = os.path.expanduser(options["identityfile"][0])
    jump = options.get("proxyjump")
    if jump and jump.lower() != "none":
        fields["proxy_jump"] = jump
    return fields


class _Resolver:
    def __init__(self, inventory: Inventory | None, config: Any, allow_unknown: bool) -> None:
        self.inventory = inventory
        self.config = config
        self.allow_unknown = allow_unknown

    def spec(self, name: str, chain: tuple[str, ...] = (), hop: bool = False) -> HostSpec:
        # The name is pasted into ssh_config's `Match exec` commands and handed to the
        # transport: never one carrying shell syntax, however it got here.
        check_host_name(name)
        if name in chain or len(chain) > 8:
            raise InventoryError(f"ProxyJump loop: {' -> '.join((*chain, name))}")
        entry = self.inventory.entries.get(name) if self.inventory else None
        if self.inventory and entry is None and not (self.allow_unknown or hop):
            raise InventoryError(f"host {name} is not in the inventory", self.inventory.path)
        fields: dict[str, Any] = {"port": DEFAULT_PORT}
        fields.update(_from_ssh_config(self.config, name))  # ssh_config, then inventory wins
        source = "ssh_config" if len(fields) > 1 else "as-is"
        attrs: dict[str, Any] = {}
        if entry is not None and self.inventory is not None:
            fields.update({k: v for k, v in self.inventory.defaults.items() if k in HOST_KEYS})
            fields.update(entry.fields)
            attrs = dict(entry.attrs)
            source = f"inventory {self.inventory.path}:{entry.line}"
        spec = HostSpec(name=name, address=fields.get("address", name), port=fields["port"],
                        user=fields.get("user"), identity_file=fields.get("identity_file"),
                        proxy_jump=fields.get("proxy_jump"), attrs=attrs, source=source)
        if spec.proxy_jump:
            spec.jumps = tuple(self.hop(h, (*chain, name)) for h in spec.proxy_jump.split(","))
        return spec

    def hop(self, text: str, chain: tuple[str, ...]) -> HostSpec:
        parsed = parse_hop(text)
        spec = self.spec(parsed.pop("name"), chain, hop=True)
        for key, value in parsed.items():  # user@ and :port written in the hop win
            setattr(spec, key, value)
        return spec


def resolve(names: Iterable[str], inventory: Inventory | None = None,
            ssh_config_path: str | os.PathLike[str] | None = None, *,
            allow_unknown: bool = False) -> list[HostSpec]:
    """Resolve host names into HostSpecs (in order, deduplicated): inventory first, then
    ssh_config, then as-is.

    The ssh_config used is *ssh_config_path*, else the inventory's ``defaults.ssh_config``,
    else ``~/.ssh/config`` when it exists. For an inventory host, values layer as
    built-in defaults < ssh_config < inventory ``defaults`` < the host's own entry.

    With an inventory, a name it does not list is an error unless *allow_unknown*: a typo in
    ``gpu[001-040]`` against a 32-host inventory should be reported, not turned into eight
    DNS failures. ProxyJump hops always fall back to ssh_config / as-is.
    """
    explicit = ssh_config_path is not None or (inventory is not None
                                               and inventory.ssh_config is not None)
    config_path = (str(ssh_config_path) if ssh_config_path is not None
                   else (inventory.ssh_config if inventory else None) or DEFAULT_SSH_CONFIG)
    config = _load_ssh_config(config_path, explicit)
    resolver = _Resolver(inventory, config, allow_unknown)
    names = list(dict.fromkeys(names))
    if inventory is not None and not allow_unknown:
        missing = [n for n in names if n not in inventory.entries]
        if missing:
            raise InventoryError(
                f"{len(missing)} host(s) not in the inventory: {fold_hosts(missing)} "
                f"(it lists {fold_hosts(inventory.names)})", inventory.path)
    return [resolver.spec(name) for name in names]
