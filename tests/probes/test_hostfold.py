"""The one host-list folding helper every layer prints with."""

from __future__ import annotations

from assistant.fleet.hostexpr import expand_hosts
from assistant.runbook.report import walk_text
from probes.hostfold import fold_counted, fold_hosts


def test_fold_hosts_round_trips() -> None:
    names = expand_hosts("gpu[001-031]")
    assert fold_hosts(names) == "gpu[001-031]"
    assert fold_hosts(["gpu002", "gpu001", "login1", "gpu001"]) == "gpu[001-002],login1"
    assert fold_hosts([]) == ""
    assert fold_hosts([], empty="-") == "-"


def test_fold_counted_heads_a_group_like_clush() -> None:
    assert fold_counted(expand_hosts("gpu[001-006,008-031]")) == "gpu[001-006,008-031] (30)"
    assert fold_counted(iter(["gpu007"])) == "gpu007 (1)"
    assert fold_counted([]) == "-"
    assert fold_counted([], empty="no specific host") == "no specific host"


def test_names_hostlist_cannot_fold_fall_back_to_a_sorted_list() -> None:
    odd = ["gpu002", "gpu001[3]", "a,b"]
    assert fold_hosts(odd) == "a,b,gpu001[3],gpu002"
    assert fold_counted(odd) == "a,b,gpu001[3],gpu002 (3)"


def test_a_walk_report_with_an_odd_host_name_is_still_printed() -> None:
    # The terminal report used to fold with collect_hostlist alone and raised BadHostlist on
    # such a name; now it prints the names as they are.
    doc = {"runbook": "hang", "session": "s1",
           "hosts": {"gpu001": {"state": "ok"}, "gpu[7]": {"state": "ok"}},
           "steps": [], "findings": [{"severity": "error", "code": "xid",
                                      "hosts": ["gpu[7]"], "message": "Xid 79"}]}
    text = walk_text(doc)
    assert "hosts: ok gpu001,gpu[7] (2)" in text
    assert "xid                      gpu[7] (1)" in text
