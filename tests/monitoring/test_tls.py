"""A Prometheus behind TLS signed by the site's private CA (a real server, HTTPS only): diag
reaches it with the CA file; without it the certificate is refused in one line; a CA file that
cannot be read is one line too; skipping the check is the operator's explicit choice."""

from __future__ import annotations

import datetime
import ipaddress
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from assistant.monitoring.client import PromClient, PromError
from assistant.monitoring.config import PromConfig, resolve
from tests.monitoring import history, promserver


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def private_ca(where: Path) -> tuple[Path, Path, Path]:
    """(CA certificate, server certificate for 127.0.0.1, server key), as a site's own CA
    would issue them."""
    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (x509.CertificateBuilder().subject_name(_name("diag test site CA"))
          .issuer_name(_name("diag test site CA")).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number())
          .not_valid_before(now - datetime.timedelta(hours=1))
          .not_valid_after(now + datetime.timedelta(days=1))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True,
                                       crl_sign=True, content_commitment=False,
                                       key_encipherment=False, data_encipherment=False,
                                       key_agreement=False, encipher_only=False,
                                       decipher_only=False), critical=True)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder().subject_name(_name("prometheus.example"))
            .issuer_name(ca.subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    paths = (where / "ca.pem", where / "server.pem", where / "server.key")
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    paths[2].chmod(0o600)
    return paths


@pytest.fixture(scope="module")
def tls_prom(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path, Path]]:
    reason = promserver.unavailable_reason()
    if reason:
        promserver.skip_or_fail(reason)
    where = tmp_path_factory.mktemp("tls")
    tls = private_ca(where)
    server = promserver.PromServer(history.openmetrics(), tls=tls)
    try:
        server.start()
    except (RuntimeError, OSError) as exc:
        server.stop()
        promserver.skip_or_fail(f"Prometheus did not start with TLS: {exc}")
    password = where / "password"
    password.write_text(promserver.PASSWORD)
    try:
        yield server.url, tls[0], password
    finally:
        server.stop()


def config(url: str, password: Path, **more: object) -> PromConfig:
    return PromConfig(url=url, username=promserver.USER, password_file=str(password),
                      timeout=5, **more)  # type: ignore[arg-type]


def test_the_sites_ca_file_reaches_a_tls_prometheus(tls_prom: tuple[str, Path, Path]) -> None:
    url, ca, password = tls_prom
    assert url.startswith("https://")
    with PromClient(config(url, password, ca_file=str(ca))) as client:
        assert client.buildinfo().get("version")
        assert client.query("count(DCGM_FI_DEV_GPU_UTIL)", at=history.END)


def test_without_the_ca_the_certificate_is_refused_in_one_line(
        tls_prom: tuple[str, Path, Path]) -> None:
    url, _, password = tls_prom
    with PromClient(config(url, password)) as client, pytest.raises(PromError) as err:
        client.buildinfo()
    assert err.value.kind == "unreachable" and "\n" not in str(err.value)
    assert "CERTIFICATE_VERIFY_FAILED" in str(err.value) or "certificate" in str(err.value)


def test_a_ca_file_that_cannot_be_read_is_one_line(tls_prom: tuple[str, Path, Path],
                                                   tmp_path: Path) -> None:
    url, _, password = tls_prom
    for bad in (tmp_path / "missing.pem", password):  # absent; not a certificate
        with pytest.raises(PromError) as err:
            PromClient(config(url, password, ca_file=str(bad)))
        assert err.value.kind == "config" and "CA file" in str(err.value), err.value
        assert "\n" not in str(err.value)


def test_skipping_the_check_is_the_operators_explicit_choice(
        tls_prom: tuple[str, Path, Path], tmp_path: Path) -> None:
    url, _, password = tls_prom
    (tmp_path / "monitoring.yaml").write_text(
        f"prometheus:\n  url: {url}\n  username: {promserver.USER}\n"
        f"  password_file: {password}\n  insecure_skip_verify: true\n")
    chosen = resolve(path=tmp_path / "monitoring.yaml")
    assert chosen is not None and chosen.insecure_skip_verify
    with PromClient(chosen) as client:
        assert client.buildinfo().get("version")
    (tmp_path / "monitoring.yaml").write_text(f"prometheus:\n  url: {url}\n"
                                              "  insecure_skip_verify: 'yes'\n")
    from assistant.monitoring.config import ConfigError

    with pytest.raises(ConfigError, match="insecure_skip_verify is true or false"):
        resolve(path=tmp_path / "monitoring.yaml")
