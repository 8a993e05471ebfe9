"""A never-linked InfiniBand port beside an Active sibling, judged on ONE host.

The uncabled second port of a dual-port HCA is spared (ArchWiki's mlx4_0; tests in
test_network.py). A host whose rails are the two ports of dual-port cards (four cards, eight
rails) with one cable never plugged shows the same port Down/Polling, never linked, beside an
Active sibling: the host's other cards of the same type use that port, so it is a rail down.
"""

from __future__ import annotations

import re

from probes.network import PROBE
from tests.probes.probe_outputs import baseline, by_code, codes, context, edit, section_text

BASE = baseline("network")
GUIDS = ("0x946dae0300cde72c", "0x946dae0300cde728", "0x946dae0300cde78c", "0x946dae0300cde780",
         "0x946dae0300cde8ac", "0x946dae0300cde9c8", "0x946dae0300cde884", "0x946dae0300cdea00")


def _ca_block(text: str, ca: str) -> str:
    m = re.search(rf"(?ms)^CA '{ca}'\n.*?(?=^CA '|\Z)", section_text(text, "ibstat"))
    assert m, ca
    return m.group(0)


def _dual_port_cards(cards: int = 4) -> str:
    """The baseline's eight rails as the two functions of *cards* dual-port cards (each pair
    shares the first one's System image GUID, as one ConnectX card's functions do)."""
    text = BASE
    per = 8 // cards
    for i in range(8):
        first = GUIDS[(i // per) * per]
        block = _ca_block(text, f"mlx5_{i}")
        new = re.sub(r"(?m)^(\s*System image GUID: ).*$", lambda m, g=first: m.group(1) + g, block)
        if new != block:
            text = edit(text, "ibstat", block, new)
    return text


def _never_linked(text: str, ca: str) -> str:
    block = _ca_block(text, ca)
    new = re.sub(r"(?m)^(\s*State: ).*$", r"\1Down", block, count=1)
    new = re.sub(r"(?m)^(\s*Physical state: ).*$", r"\1Polling", new, count=1)
    new = re.sub(r"(?m)^(\s*Rate: ).*$", r"\g<1>10", new, count=1)
    text = edit(text, "ibstat", block, new)
    for section in ("ib_1", "ib_2"):
        for name in ("link_downed", "link_error_recovery", "port_xmit_data", "port_rcv_data"):
            path = f"/sys/class/infiniband/{ca}/ports/1/counters/{name}:"
            line = next(x for x in section_text(text, section).splitlines()
                        if x.startswith(path))
            text = edit(text, section, line + "\n", f"{path}0\n")
    return text


def _spare(text: str) -> dict[str, bool]:
    return {f"{p['ca']}/{p['port']}": p["spare_port"] for p in PROBE.parse(text)["ports"]
            if p["spare_port"]}


def test_a_rail_of_a_dual_port_card_whose_twins_run_both_ports_is_down() -> None:
    # four dual-port cards, both ports of three of them Active: mlx5_7 (second function of the
    # fourth card) never cabled is a missing rail, not the card's spare port
    text = _never_linked(_dual_port_cards(), "mlx5_7")
    assert _spare(text) == {}
    findings = PROBE.check("gpu001", PROBE.parse(text), context())
    assert "ib-port-down" in codes(findings)
    assert "mlx5_7/1" in by_code(findings, "ib-port-down")[0].evidence["ports"]


def test_second_ports_unused_on_every_card_of_the_kind_are_spares() -> None:
    # two dual-port cards whose second ports are both uncabled (the design), beside rails of
    # another kind: each is its card's spare port
    text = _dual_port_cards()
    for ca in ("mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"):  # the first two cards: another kind
        block = _ca_block(text, ca)
        text = edit(text, "ibstat", block, block.replace("CA type: MT4129", "CA type: MT4123"))
    text = _never_linked(_never_linked(text, "mlx5_5"), "mlx5_7")
    assert _spare(text) == {"mlx5_5/1": True, "mlx5_7/1": True}
    assert "ib-port-down" not in codes(PROBE.check("gpu001", PROBE.parse(text), context()))


def test_a_card_of_unknown_type_is_judged_as_before() -> None:
    # no CA type: no twins to compare with, the never-linked sibling is spared as before
    text = _dual_port_cards()
    for i in range(8):
        block = _ca_block(text, f"mlx5_{i}")
        text = edit(text, "ibstat", block, re.sub(r"(?m)^\s*CA type: .*\n", "", block))
    assert _spare(_never_linked(text, "mlx5_7")) == {"mlx5_7/1": True}
