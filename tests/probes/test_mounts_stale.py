"""A mount answering "Stale file handle": this client's, or the storage's when most hosts see it.

An NFS server that replaced its export, or an IBM Storage Scale (GPFS) file system the cluster
unmounted (Problem Determination Guide, "File system forced unmount": applications get ESTALE),
leaves every client's same mount stale at once: the storage's fault (storage-network-fs-stale),
and no host is drained for it. One host stale while the others' same mount answers is that
client's (storage-mount-stale). glibc releases before ESTALE's message was renamed print
"Stale NFS file handle".
"""

from __future__ import annotations

from tests.probes.probe_outputs import baseline, edit
from tests.probes.test_faults_kernel_procs_mounts import HOME_OK, _facts, _found

GPFS = ("1302 28 0:62 / /home rw,relatime shared:640 - gpfs gpfs0 rw,relatime")


def _stale(message: str = "Stale file handle") -> str:
    base = baseline("mounts")
    return edit(base, "statfs", HOME_OK, "result 4 1 1737368305900512337 1737368305904690158 "
                f"stat: cannot read file system information for '/home': {message}")


def test_the_same_mount_stale_on_every_host_accuses_no_host() -> None:
    assert _found("mounts", _stale(), everywhere=True) == {"storage-network-fs-stale"}


def test_one_host_stale_while_the_others_answer_is_that_client() -> None:
    assert _found("mounts", _stale()) == {"storage-mount-stale", "storage-network-fs-stale"}


def test_old_glibc_wording_is_read_as_stale() -> None:
    facts = _facts("mounts", _stale("Stale NFS file handle"))
    assert facts["stale_mounts"] == ["/home"] and facts["stale_mount_count"] == 1
    assert "storage-mount-stale" in _found("mounts", _stale("Stale NFS file handle"))


def test_gpfs_forced_unmount_on_every_client_is_the_clusters() -> None:
    text = _stale()
    home = next(line for line in text.splitlines() if " /home " in line and " - " in line)
    gpfs = edit(text, "mounts", home, GPFS)
    home_mount = next(m for m in _facts("mounts", gpfs)["mounts"] if m["mountpoint"] == "/home")
    assert home_mount["fstype"] == "gpfs" and home_mount["network"] is True
    assert _found("mounts", gpfs, everywhere=True) == {"storage-network-fs-stale"}
    assert "storage-mount-stale" in _found("mounts", gpfs)


def test_a_healthy_fleet_has_no_stale_mount() -> None:
    facts = _facts("mounts", baseline("mounts"))
    assert facts["stale_mounts"] == [] and facts["stale_mount_count"] == 0


def test_a_lustre_target_deactivated_by_the_administrator_is_not_down() -> None:
    base = baseline("mounts")
    ost3 = "osc.ckpt-OST0003-osc-ffff9f2b4e6c1000"
    text = base.replace(f"{ost3}.state=\ncurrent_state: FULL\n",
                        f"{ost3}.state=\ncurrent_state: DISCONN\n", 1).replace(
        "=== diag:rc lustre", f"{ost3}.active=0\n=== diag:rc lustre", 1)
    facts = _facts("mounts", text)
    deactivated = [i for i in facts["lustre"] if i["device"].startswith("ckpt-OST0003")]
    assert deactivated and all(i["active"] is False for i in deactivated)
    assert "storage-lustre-import-down" not in _found("mounts", text)
    # the same import while the target is in service is down
    active = text.replace(".active=0", ".active=1")
    assert "storage-lustre-import-down" in _found("mounts", active)
