"""Inventory loading, host expressions and name resolution (pure: no SSH server needed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from assistant.fleet.hostexpr import InventoryError, expand_hosts
from assistant.fleet.inventory import load_inventory, resolve

EXAMPLE = """\
defaults: {user: root, port: 22, identity_file: keys/id_ed25519, known_hosts: kh}
hosts:
  gpu001: {address: 10.0.0.11, rack: r01, leaf: leaf-01}
  gpu002: {address: 10.0.0.12, port: 2222, rack: r01, leaf: leaf-01, rails: [0, 1]}
  gpu[003-004]: {rack: r02}
  login1: {user: ops, proxy_jump: gpu001}
"""


@pytest.fixture(autouse=True)
def no_user_ssh_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Never read the developer's real ~/.ssh/config."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))


def write(tmp_path: Path, text: str, name: str = "inv.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


# ---------------------------------------------------------------------------- host expressions

def test_expand_hosts_uses_slurm_syntax() -> None:
    assert expand_hosts("gpu[001-003,010]") == ["gpu001", "gpu002", "gpu003", "gpu010"]
    assert expand_hosts("gpu[1-2],login1 gpu1") == ["gpu1", "gpu2", "login1"]  # deduplicated
    assert expand_hosts(["a[1-2]", "b"]) == ["a1", "a2", "b"]
    assert expand_hosts("r[1-2]n[01-02]") == ["r1n01", "r1n02", "r2n01", "r2n02"]


@pytest.mark.parametrize("expr", ["gpu[1-", "gpu[3-1]", "", "   "])
def test_bad_expression_is_one_line_error(expr: str) -> None:
    with pytest.raises(InventoryError) as err:
        expand_hosts(expr)
    assert "\n" not in str(err.value)


# ------------------------------------------------------------------------------------ loading

def test_load_example(tmp_path: Path) -> None:
    inventory = load_inventory(write(tmp_path, EXAMPLE))
    assert inventory.names == ["gpu001", "gpu002", "gpu003", "gpu004", "login1"]
    assert inventory.known_hosts == str(tmp_path / "kh")  # relative to the inventory file
    specs = inventory.hosts
    assert list(specs) == inventory.names
    gpu001, gpu002, gpu003 = specs["gpu001"], specs["gpu002"], specs["gpu003"]
    assert (gpu001.address, gpu001.port, gpu001.user) == ("10.0.0.11", 22, "root")
    assert gpu001.identity_file == str(tmp_path / "keys" / "id_ed25519")
    assert gpu001.attrs == {"rack": "r01", "leaf": "leaf-01"}
    assert gpu002.port == 2222 and gpu002.attrs["rails"] == [0, 1]
    assert (gpu003.address, gpu003.attrs) == ("gpu003", {"rack": "r02"})
    assert gpu001.source.endswith("inv.yaml:3")
    login = specs["login1"]
    assert login.user == "ops" and login.proxy_jump == "gpu001"
    assert [hop.address for hop in login.jumps] == ["10.0.0.11"]


@pytest.mark.parametrize(("text", "line", "words"), [
    # the brace left open on line 2, not the end of the file where the parser gave up
    ("hosts:\n  a: {address: x\n", 2, "YAML syntax"),
    ("hosts:\n  a: {}\nhots: {}\n", 3, "did you mean 'hosts'"),
    ("defaults:\n  identityfile: k\nhosts: {a: {}}\n", 2, "did you mean 'identity_file'"),
    ("hosts:\n  a:\n    adress: 10.0.0.1\n", 3, "did you mean 'address'"),
    ("hosts:\n  a:\n    hostname: 10.0.0.1\n", 3, "did you mean 'address'"),
    ("hosts:\n  a: {port: 70000}\n", 2, "port must be an integer"),
    ("hosts:\n  a: {port: ssh}\n", 2, "port must be an integer"),
    ("hosts:\n  a: {}\n  a: {}\n", 3, "duplicate key 'a'"),
    ("hosts:\n  a[1-2]: {}\n  a2: {}\n", 3, "a2 is defined twice"),
    ("hosts:\n  a[1-2]: {address: 10.0.0.1}\n", 2, "one address for 2 hosts"),
    ("hosts:\n  a: {user: [x]}\n", 2, "user must be a non-empty string"),
    ("hosts:\n  a: {meta: {k: v}}\n", 2, "not a mapping"),
    ("hosts:\n  gpu[1-: {}\n", 2, "bad host name"),
    ("hosts: {}\n", 1, "'hosts:' is empty"),
    ("defaults: {user: x}\n", 1, "no 'hosts:' section"),
    ("- a\n- b\n", 1, "must be a mapping"),
])
def test_errors_name_file_and_line(tmp_path: Path, text: str, line: int, words: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(InventoryError) as err:
        load_inventory(path)
    message = str(err.value)
    assert message.startswith(f"{path}:{line}: "), message
    assert words in message
    assert "\n" not in message


def test_missing_and_empty_files(tmp_path: Path) -> None:
    with pytest.raises(InventoryError, match="no such inventory file"):
        load_inventory(tmp_path / "nope.yaml")
    with pytest.raises(InventoryError, match="the file is empty"):
        load_inventory(write(tmp_path, ""))


# --------------------------------------------------------------------------------- resolution

SSH_CONFIG = """\
Host bastion
  HostName 192.0.2.1
  User jumper
  Port 2200
Host gpu*
  User fromconfig
  IdentityFile ~/.ssh/gpu_key
  ProxyJump bastion
Host lonely
  HostName 192.0.2.9
  Port 2022
"""


def test_resolve_unknown_name_with_inventory_is_an_error(tmp_path: Path) -> None:
    inventory = load_inventory(write(tmp_path, EXAMPLE))
    with pytest.raises(InventoryError) as err:
        resolve(expand_hosts("gpu[001-006]"), inventory)
    assert "2 host(s) not in the inventory: gpu[005-006]" in str(err.value)
    (spec,) = resolve(["gpu009"], inventory, allow_unknown=True)
    assert (spec.address, spec.source) == ("gpu009", "as-is")


def test_resolve_through_ssh_config(tmp_path: Path) -> None:
    config = write(tmp_path, SSH_CONFIG, "ssh_config")
    lonely, gpu7, plain = resolve(["lonely", "gpu7", "plain", "gpu7"], ssh_config_path=config)
    assert (lonely.address, lonely.port, lonely.source) == ("192.0.2.9", 2022, "ssh_config")
    assert gpu7.user == "fromconfig"
    assert gpu7.identity_file == str(tmp_path / "home" / ".ssh" / "gpu_key")
    assert gpu7.proxy_jump == "bastion"
    (hop,) = gpu7.jumps
    assert (hop.name, hop.address, hop.port, hop.user) == ("bastion", "192.0.2.1", 2200, "jumper")
    assert (plain.address, plain.port, plain.user, plain.source) == ("plain", 22, None, "as-is")


def test_inventory_wins_over_ssh_config(tmp_path: Path) -> None:
    config = write(tmp_path, SSH_CONFIG, "ssh_config")
    inventory = load_inventory(write(tmp_path, EXAMPLE.replace(
        "known_hosts: kh}", f"known_hosts: kh, ssh_config: {config}}}")))
    (gpu001,) = resolve(["gpu001"], inventory)
    # user and identity from the inventory defaults beat ssh_config's `Host gpu*` ...
    assert gpu001.user == "root" and str(gpu001.identity_file).endswith("keys/id_ed25519")
    # ... while what the inventory does not say still comes from ssh_config.
    assert gpu001.proxy_jump == "bastion" and gpu001.jumps[0].address == "192.0.2.1"


def test_default_ssh_config_is_read_when_present(tmp_path: Path) -> None:
    ssh_dir = tmp_path / "home" / ".ssh"
    ssh_dir.mkdir(parents=True)
    (ssh_dir / "config").write_text(SSH_CONFIG)
    assert resolve(["lonely"])[0].address == "192.0.2.9"


def test_proxy_jump_hops_and_loops(tmp_path: Path) -> None:
    config = write(tmp_path, "Host a\n  ProxyJump b\nHost b\n  ProxyJump a\n"
                   "Host t\n  ProxyJump ops@h1:2201,h2\n", "ssh_config")
    with pytest.raises(InventoryError, match="ProxyJump loop: a -> b -> a"):
        resolve(["a"], ssh_config_path=config)
    (h1, h2) = resolve(["t"], ssh_config_path=config)[0].jumps
    assert (h1.name, h1.user, h1.port) == ("h1", "ops", 2201)
    assert (h2.name, h2.user, h2.port) == ("h2", None, 22)


def test_ssh_config_errors(tmp_path: Path) -> None:
    with pytest.raises(InventoryError, match="no such ssh_config file"):
        resolve(["a"], ssh_config_path=tmp_path / "missing")
    bad = write(tmp_path, "Host a\n  Port notanumber\n", "bad_config")
    with pytest.raises(InventoryError, match="bad Port"):
        resolve(["a"], ssh_config_path=bad)


def test_default_proxy_jump_and_none(tmp_path: Path) -> None:
    inventory = load_inventory(write(tmp_path, """\
defaults: {proxy_jump: bastion}
hosts:
  gpu001: {}
  bastion: {address: 203.0.113.5, user: jump, proxy_jump: none}
"""))
    specs = inventory.specs()
    assert specs["bastion"].proxy_jump is None and specs["bastion"].jumps == ()
    (hop,) = specs["gpu001"].jumps
    assert (hop.address, hop.user, hop.jumps) == ("203.0.113.5", "jump", ())

