"""Prometheus' HTTP API (``/api/v1/query``, ``query_range``, ``status/config``,
``status/buildinfo``) over httpx. Every failure is a ``PromError`` whose message is one line
a user can act on:
unreachable, login refused, timed out, a query the server refused, an answer too big. Answers
are bounded: at most ``max_bytes`` are read and at most ``max_series`` series accepted, so a
query that was not aggregated (100,000 series) costs a line, not the client's memory."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from .config import ConfigError, PromConfig

MAX_BYTES = 64 * 1024 * 1024
MAX_SERIES = 20_000


class PromError(Exception):
    """The server could not answer; ``kind`` is unreachable|auth|timeout|query|too-big|bad, or
    config (a token, password or CA file diag cannot read)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True)
class Series:
    labels: dict[str, str]
    points: list[tuple[float, float]]  # (unix seconds, value)


class PromClient:
    def __init__(self, config: PromConfig, *, max_series: int = MAX_SERIES,
                 max_bytes: int = MAX_BYTES) -> None:
        self.config = config
        self.max_series = max_series
        self.max_bytes = max_bytes
        try:  # a secret or CA file that cannot be read is the server's trouble: one line
            auth, headers, verify = _credentials(config)
        except ConfigError as exc:
            raise PromError("config", str(exc)) from None
        self._http = httpx.Client(base_url=config.url, headers=headers, auth=auth,
                                  verify=verify, timeout=httpx.Timeout(config.timeout),
                                  trust_env=False)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> PromClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _get(self, path: str, params: dict[str, str] | None = None) -> Any:
        where = f"Prometheus at {self.config.url}"
        try:
            with self._http.stream("GET", path, params=params) as response:
                body = bytearray()
                for chunk in response.iter_bytes():
                    body += chunk
                    if len(body) > self.max_bytes:
                        raise PromError("too-big", f"{where}: the answer to {path} passed "
                                        f"{self.max_bytes // 2**20} MiB; not read further")
                status = response.status_code
        except httpx.TimeoutException:
            raise PromError("timeout", f"{where} did not answer within "
                            f"{self.config.timeout:g} s ({path})") from None
        except httpx.ConnectError as exc:
            raise PromError("unreachable", f"{where} cannot be reached: "
                            f"{_reason(exc)}") from None
        except httpx.HTTPError as exc:
            raise PromError("unreachable", f"{where}: {_reason(exc)}") from None
        if status in (401, 403):
            raise PromError("auth", f"{where} refused the login (HTTP {status}): check the "
                            "bearer token file or the user and password file")
        try:
            doc = json.loads(bytes(body))
        except ValueError:
            raise PromError("bad", f"{where}: HTTP {status} and an answer that is not "
                            "Prometheus' JSON (is the URL the server's root?)") from None
        if not isinstance(doc, dict) or doc.get("status") != "success":
            error = doc.get("error", f"HTTP {status}") if isinstance(doc, dict) else status
            raise PromError("query", f"{where} refused {path}: {str(error)[:300]}")
        return doc.get("data")

    def buildinfo(self) -> dict[str, Any]:
        data = self._get("/api/v1/status/buildinfo")
        return data if isinstance(data, dict) else {}

    def config_yaml(self) -> str:
        data = self._get("/api/v1/status/config")
        return str(data.get("yaml", "")) if isinstance(data, dict) else ""

    def query(self, promql: str, at: float | None = None) -> list[Series]:
        params = {"query": promql}
        if at is not None:
            params["time"] = f"{at:.3f}"
        return self._series(self._get("/api/v1/query", params))

    def query_range(self, promql: str, start: float, end: float, step: float) -> list[Series]:
        params = {"query": promql, "start": f"{start:.3f}", "end": f"{end:.3f}",
                  "step": f"{step:g}"}
        return self._series(self._get("/api/v1/query_range", params))

    def _series(self, data: Any) -> list[Series]:
        if not isinstance(data, dict) or not isinstance(data.get("result"), list):
            raise PromError("bad", f"Prometheus at {self.config.url}: an answer without a "
                            "result list")
        result = data["result"]
        if len(result) > self.max_series:
            raise PromError("too-big", f"Prometheus at {self.config.url} answered "
                            f"{len(result):,} series (at most {self.max_series:,} taken): "
                            "the query is not aggregated by host")
        out = []
        for item in result:
            values = item.get("values") or ([item["value"]] if "value" in item else [])
            points = [(float(t), float(v)) for t, v in values]
            out.append(Series(labels=dict(item.get("metric") or {}), points=points))
        return out


def _credentials(config: PromConfig) -> tuple[httpx.Auth | None, dict[str, str], Any]:
    """(basic auth, headers, certificate check) for *config*; ConfigError for a file that
    cannot be read."""
    auth: httpx.Auth | None = None
    headers = {"Accept": "application/json"}
    token = config.secret(config.bearer_token_file, "bearer token")
    if token:
        headers["Authorization"] = f"Bearer {token}"
    elif config.username:
        auth = httpx.BasicAuth(config.username,
                               config.secret(config.password_file, "password") or "")
    return auth, headers, _verify(config)


def _verify(config: PromConfig) -> Any:
    """How the server's certificate is checked: against the system's CAs, against the
    configured CA file (a site's private CA), or not at all when the operator said so."""
    import ssl

    if config.insecure_skip_verify:
        return False
    if not config.ca_file:
        return True
    try:
        return ssl.create_default_context(cafile=str(Path(config.ca_file).expanduser()))
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"monitoring: cannot use the CA file {config.ca_file}: "
                          f"{getattr(exc, 'strerror', None) or exc}") from None


def _reason(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return text.splitlines()[0][:200]
