"""Connecting to a real Prometheus: settings from the command line, the environment and the
config file; basic auth; and each way the server can fail, one line each."""

from __future__ import annotations

import socket

import pytest

from assistant.monitoring import config
from assistant.monitoring.check import check, strip_port
from assistant.monitoring.client import PromClient, PromError
from tests.monitoring import history


def test_check_reports_exporters_host_labels_and_interval(prom_config) -> None:  # type: ignore[no-untyped-def]
    with PromClient(prom_config) as client:
        report = check(client, at=history.END)
    dcgm, node = report.exporters["dcgm-exporter"], report.exporters["node_exporter"]
    assert report.version.startswith("2.")
    assert (dcgm.host_label, dcgm.hosts) == ("Hostname", len(history.hosts()))
    assert (node.host_label, node.hosts) == ("instance", len(history.hosts()))
    assert "DCGM_FI_DEV_XID_ERRORS" in dcgm.metrics
    assert "DCGM 3.3+" in dcgm.generation
    assert report.scrape_interval == "15s" and report.job_intervals["node"] == "30s"
    assert report.problems == []


def test_configured_host_label_wins(prom_config) -> None:  # type: ignore[no-untyped-def]
    # a site that relabels: the configured label is tried first
    with PromClient(prom_config) as client:
        report = check(client, {"dcgm-exporter": "instance"}, at=history.END)
    assert report.exporters["dcgm-exporter"].host_label == "instance"


@pytest.mark.parametrize(("value", "host"), [
    ("node0001:9100", "node0001"),   # a scrape target's port
    ("node0001", "node0001"),        # Hostname has none
    ("[fd00::1]:9400", "[fd00::1]"),  # IPv6 target
])
def test_port_suffix_stripped(value: str, host: str) -> None:
    assert strip_port(value) == host


def test_wrong_password_is_one_line(prom_config, tmp_path) -> None:  # type: ignore[no-untyped-def]
    wrong = tmp_path / "wrong"
    wrong.write_text("nope")
    cfg = config.PromConfig(url=prom_config.url, username="diag", password_file=str(wrong))
    with PromClient(cfg) as client, pytest.raises(PromError) as err:
        client.buildinfo()
    assert err.value.kind == "auth" and "refused the login (HTTP 401)" in str(err.value)


def test_bearer_token_refused_by_a_basic_auth_server(prom_config, tmp_path) -> None:  # type: ignore[no-untyped-def]
    token = tmp_path / "token"
    token.write_text("abc\n")
    cfg = config.PromConfig(url=prom_config.url, bearer_token_file=str(token))
    with PromClient(cfg) as client, pytest.raises(PromError) as err:
        client.query("up")
    assert err.value.kind == "auth"


def test_unreachable_is_one_line() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with PromClient(config.PromConfig(url=f"http://127.0.0.1:{port}", timeout=2)) as client, \
            pytest.raises(PromError) as err:
        client.buildinfo()
    assert err.value.kind == "unreachable" and "\n" not in str(err.value)


def test_timeout_is_one_line() -> None:
    # a server that accepts and never answers
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(1)
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        with PromClient(config.PromConfig(url=url, timeout=0.5)) as client, \
                pytest.raises(PromError) as err:
            client.buildinfo()
    assert err.value.kind == "timeout" and "did not answer within 0.5 s" in str(err.value)


def test_too_many_series_is_one_line(prom_config) -> None:  # type: ignore[no-untyped-def]
    # an unaggregated query: every series of every metric (the cap set low to keep it small)
    with PromClient(prom_config, max_series=100) as client, pytest.raises(PromError) as err:
        client.query('{__name__=~"DCGM_FI_.+"}', at=history.END)
    assert err.value.kind == "too-big" and "not aggregated by host" in str(err.value)


def test_bad_query_is_one_line(prom_config) -> None:  # type: ignore[no-untyped-def]
    with PromClient(prom_config) as client, pytest.raises(PromError) as err:
        client.query("rate(up[")
    assert err.value.kind == "query" and "\n" not in str(err.value)


def test_resolution_order(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    # --prometheus over $DIAG_PROMETHEUS_URL over the config file; none: no monitoring
    path = tmp_path / "monitoring.yaml"
    monkeypatch.delenv(config.ENV_URL, raising=False)
    assert config.resolve(path=path) is None
    path.write_text("prometheus:\n  url: http://file:9090\n  timeout: 3\n"
                    "  host_label: {node_exporter: nodename}\n")
    got = config.resolve(path=path)
    assert got and (got.url, got.timeout, got.host_label) == (
        "http://file:9090", 3.0, {"node_exporter": "nodename"})
    monkeypatch.setenv(config.ENV_URL, "http://env:9090/")
    assert config.resolve(path=path).url == "http://env:9090"  # type: ignore[union-attr]
    assert config.resolve("https://cli:9090", path=path).url == "https://cli:9090"  # type: ignore[union-attr]


@pytest.mark.parametrize(("text", "message"), [
    ("prometheus:\n  url: http://x\n  passwd: y\n", "unknown key(s) passwd"),  # a typo
    ("prometheus:\n  url: ftp://x\n", "not an http(s) URL"),
    ("prometheus: [1]\n", "expected a 'prometheus:' mapping"),
])
def test_bad_config_is_one_line(tmp_path, monkeypatch, text: str, message: str) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.delenv(config.ENV_URL, raising=False)
    path = tmp_path / "monitoring.yaml"
    path.write_text(text)
    with pytest.raises(config.ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        config.resolve(path=path)


def test_a_hundred_thousand_series_is_one_line(prom_config) -> None:  # type: ignore[no-untyped-def]
    # a real answer of 100,000 series (diag_test_wide), refused at the default cap
    with PromClient(prom_config) as client, pytest.raises(PromError) as err:
        client.query("diag_test_wide", at=history.END)
    assert err.value.kind == "too-big" and "100,000 series" in str(err.value)
