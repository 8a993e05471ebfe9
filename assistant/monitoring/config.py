"""Where the Prometheus is and how to log in to it: ``--prometheus URL``, then
``$DIAG_PROMETHEUS_URL``, then ``~/.config/diag/monitoring.yaml`` (``prometheus:`` mapping).

Secrets are never on the command line: a bearer token and a basic-auth password are read from
files named here (like Prometheus' own ``bearer_token_file`` / ``password_file``)."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from assistant import locations, yamlfile

ENV_URL = "DIAG_PROMETHEUS_URL"
KEYS = {"url", "bearer_token_file", "username", "password_file", "ca_file", "timeout",
        "host_label", "insecure_skip_verify", "training"}
# prometheus.training: the job's own metric names (optional) and the label naming its host
TRAINING_KEYS = {"loss", "grad_norm", "step_time", "host_label"}
METRIC_NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")


class ConfigError(ValueError):
    """A monitoring setting that cannot be used; its message is one line."""


@dataclass(frozen=True)
class PromConfig:
    url: str
    bearer_token_file: str | None = None
    username: str | None = None
    password_file: str | None = None
    ca_file: str | None = None
    timeout: float = 10.0
    # exporter -> label naming the host ("Hostname", "instance", ...); detected when absent
    host_label: dict[str, str] = field(default_factory=dict)
    source: str = "--prometheus"
    # The operator's explicit opt-out of certificate checks (monitoring.yaml only); said on
    # every connection, as --accept-new-host-keys is for SSH.
    insecure_skip_verify: bool = False
    # The training job's own metrics (loss, grad_norm, step_time -> metric name; host_label)
    training: dict[str, str] = field(default_factory=dict)

    def secret(self, path: str | None, what: str) -> str | None:
        if not path:
            return None
        try:
            return Path(path).expanduser().read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise ConfigError(f"monitoring: cannot read the {what} file {path}: "
                              f"{exc.strerror or exc}") from None


def config_file() -> Path:
    return locations.config_dir() / "monitoring.yaml"


def _from_file(path: Path) -> dict[str, object]:
    try:
        data = yamlfile.load_file(path).data
    except yamlfile.YamlFileError as exc:
        raise ConfigError(f"monitoring: {exc}") from None
    section = data.get("prometheus") if isinstance(data, dict) else None
    if not isinstance(section, dict):
        raise ConfigError(f"monitoring: {path}: expected a 'prometheus:' mapping")
    unknown = sorted(set(section) - KEYS)
    if unknown:
        raise ConfigError(f"monitoring: {path}: unknown key(s) {', '.join(unknown)} "
                          f"(known: {', '.join(sorted(KEYS))})")
    return dict(section)


def resolve(url: str | None = None, *, timeout: float | None = None,
            path: Path | None = None) -> PromConfig | None:
    """The configured Prometheus, or None when nothing names one (the walk goes on without)."""
    cfg_path = path or config_file()
    settings: dict[str, object] = _from_file(cfg_path) if cfg_path.is_file() else {}
    source = str(cfg_path)
    if os.environ.get(ENV_URL):
        settings["url"], source = os.environ[ENV_URL], f"${ENV_URL}"
    if url:
        settings["url"], source = url, "--prometheus"
    if not settings.get("url"):
        return None
    target = str(settings["url"]).rstrip("/")
    if not target.startswith(("http://", "https://")):
        raise ConfigError(f"monitoring: {source}: '{target}' is not an http(s) URL")
    labels = settings.get("host_label") or {}
    if isinstance(labels, str):
        labels = {"dcgm-exporter": labels, "node_exporter": labels}
    if not isinstance(labels, dict):
        raise ConfigError(f"monitoring: {source}: host_label is a label or a mapping")
    try:
        wait = float(timeout if timeout is not None else settings.get("timeout", 10.0))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ConfigError(f"monitoring: {source}: timeout must be seconds") from None
    insecure = settings.get("insecure_skip_verify", False)
    if not isinstance(insecure, bool):
        raise ConfigError(f"monitoring: {source}: insecure_skip_verify is true or false")
    return PromConfig(url=target, bearer_token_file=_opt(settings, "bearer_token_file"),
                      insecure_skip_verify=insecure,
                      training=_training(settings.get("training"), source),
                      username=_opt(settings, "username"),
                      password_file=_opt(settings, "password_file"),
                      ca_file=_opt(settings, "ca_file"), timeout=wait,
                      host_label={str(k): str(v) for k, v in labels.items()}, source=source)


def _opt(settings: dict[str, object], key: str) -> str | None:
    value = settings.get(key)
    return None if value in (None, "") else str(value)


def _training(spec: object, source: str) -> dict[str, str]:
    """prometheus.training: metric names go into PromQL, so each must be a metric name and
    nothing else (a label matcher or an expression in the file is refused)."""
    if spec is None:
        return {}
    if not isinstance(spec, dict) or set(spec) - TRAINING_KEYS:
        raise ConfigError(f"monitoring: {source}: training is a mapping of "
                          f"{', '.join(sorted(TRAINING_KEYS))}")
    out = {str(k): str(v) for k, v in spec.items()}
    for key, name in out.items():
        if not METRIC_NAME.match(name):
            raise ConfigError(f"monitoring: {source}: training.{key}: '{name}' is not a "
                              "Prometheus metric or label name")
    return out
