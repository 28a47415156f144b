"""A party's own settings file, loaded and checked: :class:`PartySettings` and the
``[limits]`` of its node (:class:`NodeLimits`).

The file's format is in :mod:`ppdm.parties.consortium`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives import serialization

from ppdm.errors import ConfigError
from ppdm.parties.certificates import _load_cert, certificate_fingerprint
from ppdm.parties.consortium_file import (
    Consortium,
    PartyEntry,
    _check_address,
    _check_validity,
    _int_field,
    _pem_field,
    load_consortium,
)
from ppdm.parties.tomlfiles import _read_toml

__all__ = ["NodeLimits", "PartySettings", "load_settings", "reload_party_tables"]

DEFAULT_JOB_TIMEOUT_S = 60.0
DEFAULT_MAX_WORKERS = 64


@dataclass(frozen=True)
class NodeLimits:
    """What one member can make a node hold (the ``[limits]`` table of a party's settings).

    Every field has a safe default; ``docs/deployment.md`` lists them. Over a limit, the
    node refuses the stream or call (``RESOURCE_EXHAUSTED``), or ends the job naming the
    sending party (:class:`ppdm.errors.ProtocolError`).
    """

    #: jobs running at this node at once
    max_running_jobs: int = 16
    #: incoming Exchange streams one peer may hold open at once
    max_streams_per_peer: int = 20
    #: how long a stream for a job this node has not started yet waits for it
    pending_job_wait_s: float = 30.0
    #: an incoming stream that carries no frame for this long is closed
    idle_stream_s: float = 600.0
    #: ... and once its job has ended at this node, after this long without a frame
    ended_stream_grace_s: float = 30.0
    #: bytes one peer may have delivered to one job that the job has not read yet
    max_unread_bytes_per_peer: int = 256 << 20
    #: bytes all peers together may have delivered to one job and it has not read yet
    max_unread_bytes_per_job: int = 1 << 30
    #: jobs one initiator may have running at this node at once (the rest of
    #: ``max_running_jobs`` stays free for the other members)
    max_running_jobs_per_initiator: int = 4
    #: how long an accepted job waits for its ``StartJob`` (the initiator's polls while
    #: other members' owners decide extend it, up to the longest consent deadline)
    accepted_job_ttl_s: float = 120.0

    @classmethod
    def from_table(cls, table: Any, where: str) -> NodeLimits:
        """Read and check a ``[limits]`` table (unknown keys and bad values refused)."""
        if not isinstance(table, dict):
            raise ConfigError(f"{where} must be a table")
        known = {f for f in cls.__dataclass_fields__}
        unknown = sorted(set(table) - known)
        if unknown:
            raise ConfigError(f"{where}: unknown setting(s) {unknown}; known: {sorted(known)}")
        values: dict[str, Any] = {}
        for key, value in table.items():
            default = getattr(cls, key)
            if isinstance(default, float):
                if (
                    isinstance(value, bool)
                    or not isinstance(value, int | float)
                    or not 0 < value < 1e9
                ):
                    raise ConfigError(f"{where}.{key} must be a positive number, got {value!r}")
                values[key] = float(value)
            else:
                values[key] = _int_field(table, key, default, where, minimum=1)
        limits = cls(**values)
        if limits.max_unread_bytes_per_peer > limits.max_unread_bytes_per_job:
            raise ConfigError(
                f"{where}.max_unread_bytes_per_peer must not exceed max_unread_bytes_per_job"
            )
        if limits.max_running_jobs_per_initiator > limits.max_running_jobs:
            if "max_running_jobs_per_initiator" in table:
                raise ConfigError(
                    f"{where}.max_running_jobs_per_initiator must not exceed max_running_jobs"
                )
            limits = replace(limits, max_running_jobs_per_initiator=limits.max_running_jobs)
        return limits


# A party's settings ---------------------------------------------------------------------


@dataclass(frozen=True)
class PartySettings:
    """A party's own settings file, loaded and checked (see the module docstring)."""

    name: str
    consortium: Consortium
    certificate_pem: bytes
    private_key_pem: bytes
    listen: str
    job_timeout_s: float = DEFAULT_JOB_TIMEOUT_S
    max_workers: int = DEFAULT_MAX_WORKERS
    raw: Mapping[str, Any] = field(default_factory=dict)
    path: Path | None = None
    limits: NodeLimits = field(default_factory=NodeLimits)
    #: ``host:port`` of the plain HTTP listener (``/healthz``, ``/readyz``, ``/metrics``)
    http_listen: str | None = None
    #: ``host:port`` of the owner's web console (``[console] listen``; ``None``: no console)
    console_listen: str | None = None

    @property
    def base_dir(self) -> Path:
        """Folder relative data paths are resolved against (the settings file's)."""
        return self.path.parent if self.path is not None else Path.cwd()

    @property
    def entry(self) -> PartyEntry:
        return self.consortium.party(self.name)


def load_settings(path: str | Path, *, verify_own_certificate: bool = True) -> PartySettings:
    """Load a party's settings file and the consortium file it points to, and check them.

    Besides the checks of :func:`load_consortium`: the party is on the roster, its
    certificate is the roster's certificate for it, and its private key belongs to that
    certificate.
    """
    path = Path(path)
    doc = _read_toml(path)
    base = path.parent
    name = doc.get("party")
    if not isinstance(name, str) or not name:
        raise ConfigError(f"{path}: 'party' must name this party")
    cons_ref = doc.get("consortium")
    if not isinstance(cons_ref, str) or not cons_ref:
        raise ConfigError(f"{path}: 'consortium' must be the path of the consortium file")
    cons_path = Path(cons_ref)
    consortium = load_consortium(cons_path if cons_path.is_absolute() else base / cons_path)
    entry = consortium.party(name)
    tls = doc.get("tls")
    if not isinstance(tls, dict):
        raise ConfigError(f"{path}: missing [tls] table (certificate, private_key)")
    cert_pem = _pem_field(tls.get("certificate"), base, f"{path}: tls.certificate")
    key_pem = _pem_field(tls.get("private_key"), base, f"{path}: tls.private_key")
    cert = _load_cert(cert_pem, f"{path}: tls.certificate")
    _check_validity(cert, f"{path}: tls.certificate")
    if verify_own_certificate and certificate_fingerprint(cert) != entry.fingerprint:
        raise ConfigError(
            f"{path}: tls.certificate is not the certificate the consortium file lists for {name!r}"
        )
    try:
        key = serialization.load_pem_private_key(key_pem, password=None)
    except (ValueError, TypeError) as exc:
        raise ConfigError(
            f"{path}: tls.private_key is not an unencrypted PEM key ({exc})"
        ) from None
    pub = serialization.PublicFormat.SubjectPublicKeyInfo
    if key.public_key().public_bytes(
        serialization.Encoding.DER, pub
    ) != cert.public_key().public_bytes(serialization.Encoding.DER, pub):
        raise ConfigError(f"{path}: tls.private_key does not belong to tls.certificate")
    node = doc.get("node", {})
    if not isinstance(node, dict):
        raise ConfigError(f"{path}: [node] must be a table")
    listen = _check_address(node.get("listen", entry.address), f"{path}: node.listen")
    timeout = node.get("job_timeout_s", DEFAULT_JOB_TIMEOUT_S)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0:
        raise ConfigError(f"{path}: node.job_timeout_s must be a positive number")
    workers = _int_field(node, "max_workers", DEFAULT_MAX_WORKERS, f"{path}: node", minimum=8)
    for table in ("inputs", "data", "compute"):  # [compute]: checked by ppdm.compute
        if not isinstance(doc.get(table, {}), dict):
            raise ConfigError(f"{path}: [{table}] must be a table")
    limits = NodeLimits.from_table(doc.get("limits", {}), f"{path}: limits")
    http_listen = node.get("http_listen")
    if http_listen is not None:
        http_listen = _check_address(http_listen, f"{path}: node.http_listen")
    console = doc.get("console")
    if console is not None and not isinstance(console, dict):
        raise ConfigError(f"{path}: [console] must be a table")
    console_listen = None
    if console is not None:
        console_listen = _check_address(
            console.get("listen", "127.0.0.1:9180"), f"{path}: console.listen"
        )
    return PartySettings(
        name=name,
        consortium=consortium,
        certificate_pem=cert_pem,
        private_key_pem=key_pem,
        listen=listen,
        job_timeout_s=float(timeout),
        max_workers=workers,
        raw=doc,
        path=path,
        limits=limits,
        http_listen=http_listen,
        console_listen=console_listen,
    )


def reload_party_tables(settings: PartySettings) -> dict[str, Any]:
    """The party's settings as a fresh mapping with ``[inputs]`` and ``[data]`` re-read
    from its settings file (what a node uses for each new job).

    Only these two tables are re-read and checked (each a table; each ``[data]`` entry a
    non-empty path or a source table); everything else — identity, keys, listen address,
    limits — stays as loaded at start. So a data file written by ``ppdm partition
    --settings-dir`` (or an owner's edit of ``[data]``) is seen by the next job without a
    restart; whether the data file itself exists is checked by the job that reads it,
    with an error naming that file.
    """
    fresh = dict(settings.raw)
    if settings.path is None:
        return fresh
    doc = _read_toml(settings.path)
    for table in ("inputs", "data"):
        value = doc.get(table, {})
        if not isinstance(value, dict):
            raise ConfigError(f"{settings.path}: [{table}] must be a table")
        fresh[table] = value
    for key, entry in fresh["data"].items():
        if not (isinstance(entry, dict) or (isinstance(entry, str) and entry)):
            raise ConfigError(
                f"{settings.path}: data.{key} must be a data file path or a source table"
            )
    return fresh
