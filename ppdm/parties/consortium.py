"""Consortium roster, per-party settings, and the keys and certificates of a testbed.

A *consortium* is the set of organizations that run jobs together. Two kinds of files
describe it (both TOML):

- The **consortium file** (``consortium.toml``), the same at every party and public
  within the consortium: its name, the CA certificate every party trusts, the maximum
  gRPC message size, and the roster — each party's name, ``host:port`` address and
  certificate. A party's identity on the network is the certificate listed here: a peer
  is accepted only if it presents exactly that certificate (compared by SHA-256
  fingerprint) and the certificate names the party (DNS subject alternative name or
  common name).
- A **settings file** per party (``alice.toml``), which never leaves that party's host:
  its name, where the consortium file is, its TLS certificate and *private key*, how its
  node listens, and its private inputs (``[inputs]``) and data paths (``[data]``).

Consortium file::

    [consortium]
    name = "ppdm-testbed"
    ca_certificate = "ca.crt"          # path relative to this file, or inline PEM
    max_message_bytes = 4194304         # largest gRPC message; larger envelopes are chunked
    max_envelope_bytes = 536870912      # largest reassembled protocol message

    [[parties]]
    name = "alice"
    address = "127.0.0.1:50051"
    certificate = "certs/alice.crt"     # path relative to this file, or inline PEM

Settings file::

    party = "alice"
    consortium = "consortium.toml"      # path relative to this file

    [tls]
    certificate = "certs/alice.crt"
    private_key = "private/alice.key"

    [node]
    listen = "127.0.0.1:50051"          # default: the roster address
    job_timeout_s = 60.0                # default receive timeout of jobs
    max_workers = 64                    # gRPC server threads
    policy = "alice.policy.toml"        # the owner's policy (docs/governance.md);
                                        # none: the default policy applies
    state_dir = "state/alice"           # ledger and job records (default)
    http_listen = "127.0.0.1:9101"      # optional: /healthz, /readyz, /metrics (plain HTTP)

    [console]                           # optional: the owner's web console (docs/console.md)
    listen = "127.0.0.1:9180"           # the default; keep it on loopback

    [compute]                           # optional: where local work runs (docs/scale.md)
    engine = "embedded"                 # the default; or "spark" with master, executor_memory,
                                        # driver_memory and conf (ppdm.compute)

    [limits]                            # optional; what one member can make the node hold
    max_streams_per_peer = 20           # (all fields and defaults: NodeLimits)

    [inputs]
    secure_sum = 417

    [data]
    adult = "data/adult.csv"

:func:`init_consortium` (``ppdm consortium init``) writes a self-contained testbed: a
fresh CA, an ECDSA P-256 key and certificate per party (DNS SAN = party name, IP SAN =
host), the consortium file and one settings file per party. Real organizations use their
own CA instead (see ``docs/deployment.md``); :func:`load_consortium` and
:func:`load_settings` check whatever they produce and raise :class:`ConfigError` with
the file and the problem.
"""

from __future__ import annotations

import base64
import datetime as _dt
import hashlib
import ipaddress
import json
import os
import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from ppdm.errors import ConfigError

if TYPE_CHECKING:
    from ppdm.randomness import RandomSource

__all__ = [
    "DEFAULT_MAX_ENVELOPE_BYTES",
    "DEFAULT_MAX_MESSAGE_BYTES",
    "Consortium",
    "PartyEntry",
    "PartySettings",
    "certificate_fingerprint",
    "certificate_names",
    "generate_ca",
    "init_consortium",
    "issue_certificate",
    "load_consortium",
    "load_settings",
    "reload_party_tables",
    "update_toml",
    "update_toml_file",
    "write_party_files",
    "write_toml",
]

DEFAULT_MAX_MESSAGE_BYTES = 4 * 1024 * 1024
DEFAULT_MAX_ENVELOPE_BYTES = 512 * 1024 * 1024
DEFAULT_JOB_TIMEOUT_S = 60.0
DEFAULT_MAX_WORKERS = 64
MIN_MESSAGE_BYTES = 16 * 1024


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


# Party names travel in certificates as DNS names, so they are DNS labels.
_NAME_RE = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$")


# Certificates ---------------------------------------------------------------------------


def _load_cert(pem: bytes, where: str) -> x509.Certificate:
    try:
        return x509.load_pem_x509_certificate(pem)
    except ValueError as exc:
        raise ConfigError(f"{where}: not a PEM X.509 certificate ({exc})") from None


def certificate_fingerprint(cert: bytes | x509.Certificate) -> str:
    """SHA-256 fingerprint (hex) of a certificate's DER encoding; PEM or DER bytes accepted."""
    if isinstance(cert, bytes):
        cert = (
            x509.load_pem_x509_certificate(cert)
            if cert.lstrip().startswith(b"-----BEGIN")
            else x509.load_der_x509_certificate(cert)
        )
    return hashlib.sha256(cert.public_bytes(serialization.Encoding.DER)).hexdigest()


def certificate_names(cert: x509.Certificate) -> list[str]:
    """The DNS subject alternative names of ``cert``, then its common name(s)."""
    names: list[str] = []
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName)
        names.extend(san.value.get_values_for_type(x509.DNSName))
    except x509.ExtensionNotFound:
        pass
    for attr in cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME):
        value = attr.value if isinstance(attr.value, str) else attr.value.decode()
        names.append(value)
    return names


def generate_ca(
    name: str, *, validity_days: int = 365
) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    """A fresh self-signed ECDSA P-256 certificate authority for a consortium."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, name),
            x509.NameAttribute(NameOID.COMMON_NAME, f"{name} consortium CA"),
        ]
    )
    now = _dt.datetime.now(_dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _dt.timedelta(minutes=5))
        .not_valid_after(now + _dt.timedelta(days=validity_days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), False)
        .sign(key, hashes.SHA256())
    )
    return key, cert


def issue_certificate(
    ca_key: ec.EllipticCurvePrivateKey,
    ca_cert: x509.Certificate,
    party: str,
    *,
    hosts: Sequence[str] = (),
    validity_days: int = 365,
    not_before: _dt.datetime | None = None,
) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    """An ECDSA P-256 key and a certificate for ``party`` signed by the CA.

    The certificate names the party as its common name and DNS subject alternative name
    (the identity the nodes check) and lists ``hosts`` (IP addresses or DNS names) as
    further alternative names; it is valid for TLS servers and clients.
    """
    key = ec.generate_private_key(ec.SECP256R1())
    alt: list[x509.GeneralName] = [x509.DNSName(party)]
    for host in hosts:
        try:
            alt.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            if host != party:
                alt.append(x509.DNSName(host))
    start = not_before or _dt.datetime.now(_dt.UTC) - _dt.timedelta(minutes=5)
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, party)]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(start + _dt.timedelta(minutes=5) + _dt.timedelta(days=validity_days))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.SubjectAlternativeName(alt), critical=False)
        .add_extension(
            x509.ExtendedKeyUsage(
                [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
            ),
            critical=False,
        )
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_cert.public_key()),  # type: ignore[arg-type]
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    return key, cert


def _pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _key_pem(key: ec.EllipticCurvePrivateKey, passphrase: bytes | None = None) -> bytes:
    encryption: serialization.KeySerializationEncryption = (
        serialization.BestAvailableEncryption(passphrase)
        if passphrase
        else serialization.NoEncryption()
    )
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption
    )


def _sign_new_roster(
    ca_key: ec.EllipticCurvePrivateKey,
    ca_cert: x509.Certificate,
    name: str,
    max_message_bytes: int,
    parties: Sequence[tuple[str, str, str]],
) -> str:
    payload = roster_payload(
        name,
        1,
        max_message_bytes,
        max(DEFAULT_MAX_ENVELOPE_BYTES, max_message_bytes),
        certificate_fingerprint(ca_cert),
        parties,
    )
    return base64.b64encode(sign_payload(ca_key, payload)).decode()


# The roster -----------------------------------------------------------------------------


def roster_payload(
    name: str,
    version: int,
    max_message_bytes: int,
    max_envelope_bytes: int,
    ca_fingerprint: str,
    parties: Sequence[tuple[str, str, str]],
) -> bytes:
    """The canonical bytes of a roster that the consortium CA signs (JSON, sorted keys):
    name, version, size limits, the CA and every member's name, address and certificate
    fingerprint, in roster order."""
    doc = {
        "schema": "ppdm.roster/1",
        "name": name,
        "version": int(version),
        "max_message_bytes": int(max_message_bytes),
        "max_envelope_bytes": int(max_envelope_bytes),
        "ca_sha256": ca_fingerprint,
        "parties": [{"name": n, "address": a, "certificate_sha256": f} for n, a, f in parties],
    }
    return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()


def sign_payload(ca_key: ec.EllipticCurvePrivateKey, payload: bytes) -> bytes:
    """The CA's ECDSA (SHA-256) signature of a roster payload."""
    return ca_key.sign(payload, ec.ECDSA(hashes.SHA256()))


def _verify_roster(ca: x509.Certificate, payload: bytes, signature: bytes, where: str) -> None:
    public = ca.public_key()
    if not isinstance(public, ec.EllipticCurvePublicKey):
        raise ConfigError(f"{where}: the consortium CA key is not an EC key")
    try:
        public.verify(signature, payload, ec.ECDSA(hashes.SHA256()))
    except InvalidSignature:
        raise ConfigError(
            f"{where}: the roster signature does not verify with the consortium CA "
            "(edited after signing, or signed by another key)"
        ) from None


@dataclass(frozen=True)
class PartyEntry:
    """One roster line: a party's name, node address and certificate."""

    name: str
    address: str
    certificate_pem: bytes
    fingerprint: str
    not_before: _dt.datetime | None = None
    not_after: _dt.datetime | None = None

    def valid_now(self, now: _dt.datetime | None = None) -> bool:
        """Whether the member's certificate is valid at ``now`` (default: now)."""
        now = now or _dt.datetime.now(_dt.UTC)
        if self.not_before is not None and now < self.not_before:
            return False
        return not (self.not_after is not None and now > self.not_after)

    def validity_problem(self) -> str | None:
        """``None``, or why the member cannot take part now (naming the dates)."""
        if self.valid_now():
            return None
        if self.not_after is not None and _dt.datetime.now(_dt.UTC) > self.not_after:
            return f"the certificate of {self.name!r} expired on {self.not_after:%Y-%m-%d}"
        return f"the certificate of {self.name!r} is not valid before {self.not_before:%Y-%m-%d}"

    @property
    def host(self) -> str:
        return self.address.rsplit(":", 1)[0].strip("[]")

    @property
    def port(self) -> int:
        return int(self.address.rsplit(":", 1)[1])


@dataclass(frozen=True)
class Consortium:
    """The consortium file, loaded and checked (see the module docstring)."""

    name: str
    parties: tuple[PartyEntry, ...]
    ca_certificate_pem: bytes
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    max_envelope_bytes: int = DEFAULT_MAX_ENVELOPE_BYTES
    path: Path | None = None
    #: roster version: every change (``ppdm consortium add-party`` ...) increments it
    version: int = 0
    #: the CA's ECDSA signature of :meth:`payload` (``None``: an unsigned roster)
    signature: bytes | None = None

    @property
    def signed(self) -> bool:
        return self.signature is not None

    @property
    def ca_fingerprint(self) -> str:
        return certificate_fingerprint(self.ca_certificate_pem)

    def payload(self) -> bytes:
        """What the CA signs: the roster's meaning, not its file layout."""
        return roster_payload(
            self.name,
            self.version,
            self.max_message_bytes,
            self.max_envelope_bytes,
            self.ca_fingerprint,
            [(p.name, p.address, p.fingerprint) for p in self.parties],
        )

    @property
    def names(self) -> tuple[str, ...]:
        """Party names in roster order (the order every job's ``net.parties`` follows)."""
        return tuple(p.name for p in self.parties)

    def active_names(self) -> tuple[str, ...]:
        """The members whose certificates are valid now (the default party set of a job:
        a member whose certificate expired is left out, named by :meth:`inactive`)."""
        return tuple(p.name for p in self.parties if p.valid_now())

    def inactive(self) -> dict[str, str]:
        """Members that cannot take part now, with the reason (expired certificates)."""
        return {p.name: why for p in self.parties if (why := p.validity_problem()) is not None}

    def party(self, name: str) -> PartyEntry:
        """The roster entry of ``name``; :class:`ConfigError` if it is not a member."""
        for p in self.parties:
            if p.name == name:
                return p
        raise ConfigError(
            f"party {name!r} is not in consortium {self.name!r} (members: {', '.join(self.names)})"
        )

    def identify(self, cert_pem: bytes) -> str | None:
        """The roster party that presented ``cert_pem``, or ``None`` if it is not one.

        The certificate must be byte-for-byte the roster's certificate of a party
        (SHA-256 fingerprint) *and* name that party (DNS SAN or CN), so a certificate from
        another CA, another party's certificate under a different name, and a second
        certificate the CA issued for a member's name are all refused.
        """
        try:
            cert = x509.load_pem_x509_certificate(cert_pem)
        except ValueError:
            return None
        fp = certificate_fingerprint(cert)
        names = certificate_names(cert)
        for p in self.parties:
            if p.fingerprint == fp and p.name in names:
                return p.name
        return None

    def order(self, names: Sequence[str]) -> tuple[str, ...]:
        """``names`` in roster order; :class:`ConfigError` on unknown or repeated names."""
        if len(set(names)) != len(names):
            raise ConfigError(f"party list {list(names)} repeats a name")
        for n in names:
            self.party(n)
        wanted = set(names)
        return tuple(n for n in self.names if n in wanted)


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as f:
            return tomllib.load(f)
    except FileNotFoundError:
        raise ConfigError(f"file not found: {path}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc})") from None


def _pem_field(value: Any, base: Path | None, where: str) -> bytes:
    """A PEM given inline or as a path relative to ``base`` (``None``: inline only)."""
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{where} must be a file path or an inline PEM string")
    if value.lstrip().startswith("-----BEGIN"):
        return value.encode()
    if base is None:
        raise ConfigError(f"{where} must be an inline PEM in a roster sent between nodes")
    path = Path(value)
    path = path if path.is_absolute() else base / path
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"{where}: file not found: {path}") from None
    except OSError as exc:
        raise ConfigError(f"{where}: cannot read {path} ({exc.strerror})") from None


def _check_address(address: Any, where: str) -> str:
    if not isinstance(address, str) or ":" not in address:
        raise ConfigError(f"{where} must be 'host:port', got {address!r}")
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(f"{where} must be 'host:port' with a port in 1..65535, got {address!r}")
    return address


def _int_field(
    table: Mapping[str, Any], key: str, default: int, where: str, *, minimum: int
) -> int:
    value = table.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(f"{where}.{key} must be an integer >= {minimum}, got {value!r}")
    return value


def _check_validity(cert: x509.Certificate, where: str) -> None:
    now = _dt.datetime.now(_dt.UTC)
    if not cert.not_valid_before_utc <= now <= cert.not_valid_after_utc:
        raise ConfigError(
            f"{where}: certificate is not valid now (valid {cert.not_valid_before_utc:%Y-%m-%d}"
            f" to {cert.not_valid_after_utc:%Y-%m-%d})"
        )


def load_consortium(path: str | Path, *, verify_signature: bool = True) -> Consortium:
    """Load and check a consortium file (see the module docstring).

    Checks: a name; a CA certificate; at least one party; party names are lower-case DNS
    labels and distinct; addresses are ``host:port`` and distinct; every certificate
    parses, is currently valid, is signed by the CA and names its party; a roster
    ``signature`` verifies with the CA (a version above 0 must be signed).
    """
    path = Path(path)
    return _parse_consortium(_read_toml(path), path.parent, path, verify_signature)


def loads_consortium(text: str, where: str = "roster") -> Consortium:
    """A self-contained roster (inline PEMs, as :func:`roster_toml` writes) from text."""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{where}: not valid TOML ({exc})") from None
    return _parse_consortium(doc, None, where, True)


def _parse_consortium(
    doc: dict[str, Any], base: Path | None, path: Any, verify_signature: bool
) -> Consortium:
    table = doc.get("consortium")
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: missing [consortium] table")
    name = table.get("name")
    if not isinstance(name, str) or not name:
        raise ConfigError(f"{path}: consortium.name must be a non-empty string")
    ca_pem = _pem_field(table.get("ca_certificate"), base, f"{path}: consortium.ca_certificate")
    ca = _load_cert(ca_pem, f"{path}: consortium.ca_certificate")
    _check_validity(ca, f"{path}: consortium.ca_certificate")
    max_msg = _int_field(
        table,
        "max_message_bytes",
        DEFAULT_MAX_MESSAGE_BYTES,
        f"{path}: consortium",
        minimum=MIN_MESSAGE_BYTES,
    )
    max_env = _int_field(
        table,
        "max_envelope_bytes",
        DEFAULT_MAX_ENVELOPE_BYTES,
        f"{path}: consortium",
        minimum=max_msg,
    )
    rows = doc.get("parties")
    if not isinstance(rows, list) or not rows:
        raise ConfigError(f"{path}: no [[parties]] listed")
    entries: list[PartyEntry] = []
    seen_names: set[str] = set()
    seen_addresses: set[str] = set()
    for i, row in enumerate(rows):
        where = f"{path}: parties[{i}]"
        if not isinstance(row, dict):
            raise ConfigError(f"{where} must be a table")
        pname = row.get("name")
        if not isinstance(pname, str) or not _NAME_RE.match(pname):
            raise ConfigError(
                f"{where}.name must be a lower-case DNS label (a-z, 0-9, '-'), got {pname!r}"
            )
        if pname in seen_names:
            raise ConfigError(f"{where}: party {pname!r} is listed twice")
        address = _check_address(row.get("address"), f"{where}.address")
        if address in seen_addresses:
            raise ConfigError(f"{where}: address {address} is used by another party")
        pem = _pem_field(row.get("certificate"), base, f"{where}.certificate")
        cert = _load_cert(pem, f"{where}.certificate")
        # An expired member does not stop the others: it is recorded and refused per job.
        try:
            cert.verify_directly_issued_by(ca)
        except (ValueError, TypeError, InvalidSignature):
            raise ConfigError(
                f"{where}: certificate of {pname!r} is not signed by the consortium CA"
            ) from None
        if pname not in certificate_names(cert):
            raise ConfigError(
                f"{where}: certificate of {pname!r} names {certificate_names(cert)}, "
                f"not {pname!r} (it must be a DNS subject alternative name or the CN)"
            )
        seen_names.add(pname)
        seen_addresses.add(address)
        entries.append(
            PartyEntry(
                pname,
                address,
                pem,
                certificate_fingerprint(cert),
                cert.not_valid_before_utc,
                cert.not_valid_after_utc,
            )
        )
    version = table.get("version", 0)
    if isinstance(version, bool) or not isinstance(version, int) or version < 0:
        raise ConfigError(f"{path}: consortium.version must be an integer >= 0")
    sig_text = table.get("signature")
    signature = None
    if sig_text is not None:
        try:
            signature = base64.b64decode(str(sig_text), validate=True)
        except (ValueError, TypeError):
            raise ConfigError(f"{path}: consortium.signature is not base64") from None
    elif version > 0 and verify_signature:
        raise ConfigError(
            f"{path}: roster version {version} is not signed (consortium.signature is missing)"
        )
    consortium = Consortium(
        name=name,
        parties=tuple(entries),
        ca_certificate_pem=ca_pem,
        max_message_bytes=max_msg,
        max_envelope_bytes=max_env,
        path=path if isinstance(path, Path) else None,
        version=version,
        signature=signature,
    )
    if signature is not None and verify_signature:
        _verify_roster(ca, consortium.payload(), signature, str(path))
    return consortium


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


# Writing --------------------------------------------------------------------------------
#
# Settings and consortium files are written with tomlkit, which keeps what it does not
# touch: an update of a file an owner has edited changes only the keys it must and keeps
# the owner's comments, key order and formatting.


def _toml_item(value: Any) -> Any:
    import tomlkit

    if isinstance(value, Mapping):
        table = tomlkit.table()
        for k, v in value.items():
            table.add(k, _toml_item(v))
        return table
    if isinstance(value, tuple):
        value = list(value)
    if not isinstance(value, bool | int | float | str | list):
        raise TypeError(f"cannot write a {type(value).__name__} to TOML")
    return tomlkit.item(value)


def _add_comment(container: Any, text: str | None) -> None:
    import tomlkit

    for line in (text or "").splitlines():
        # a TOML comment may hold no control character but tab: escape the others
        line = "".join(
            f"\\u{ord(c):04x}" if (ord(c) < 0x20 and c != "\t") or ord(c) == 0x7F else c
            for c in line
        )
        container.add(tomlkit.comment(line))


def write_toml(
    doc: Mapping[str, Any],
    *,
    header: str = "",
    comments: Mapping[str, str] | None = None,
) -> str:
    """TOML text of ``doc``: scalars and lists first, then tables and arrays of tables.

    ``header`` becomes comment lines at the top; ``comments`` maps ``"key"``,
    ``"table.key"`` or ``"[table]"`` to comment lines written above that key, or just
    below that table's header (how :func:`init_consortium` explains each setting in the
    files it writes).
    """
    import tomlkit

    notes = dict(comments or {})
    out = tomlkit.document()
    _add_comment(out, header)
    if header:
        out.add(tomlkit.nl())
    tables: list[tuple[str, Mapping[str, Any]]] = []
    arrays: list[tuple[str, list[Mapping[str, Any]]]] = []
    for key, value in doc.items():
        if isinstance(value, Mapping):
            tables.append((key, value))
        elif isinstance(value, list) and value and all(isinstance(v, Mapping) for v in value):
            arrays.append((key, value))
        else:
            _add_comment(out, notes.get(key))
            out.add(key, _toml_item(value))
    for key, table in tables:
        t = tomlkit.table()
        _add_comment(t, notes.get(f"[{key}]"))
        for k, v in table.items():
            _add_comment(t, notes.get(f"{key}.{k}"))
            t.add(k, _toml_item(v))
        out.add(key, t)
    for key, rows in arrays:
        aot = tomlkit.aot()
        for row in rows:
            aot.append(_toml_item(row))
        out.add(key, aot)
    return tomlkit.dumps(out).lstrip("\n")


def _merge_items(target: Any, updates: Mapping[str, Any], *, only_missing: bool) -> None:
    for key, value in updates.items():
        current = target.get(key)
        if isinstance(value, Mapping) and isinstance(current, Mapping):
            _merge_items(current, value, only_missing=only_missing)
        elif not (only_missing and key in target):
            target[key] = _toml_item(value)


def update_toml(
    text: str,
    updates: Mapping[str, Any],
    *,
    defaults: Mapping[str, Any] | None = None,
    where: str = "TOML text",
) -> str:
    """``text`` with ``updates`` set and ``defaults`` added where missing; nothing else
    changes.

    Tables are merged key by key (a table in ``updates`` replaces only the keys it
    names); any other value replaces the old one in place. The comments, key order and
    formatting of everything not named are kept. A ``text`` that is not valid TOML is a
    :class:`ConfigError` naming ``where``.
    """
    import tomlkit
    from tomlkit.exceptions import TOMLKitError

    try:
        doc = tomlkit.parse(text)
    except TOMLKitError as exc:
        raise ConfigError(f"{where}: not valid TOML ({exc})") from None
    _merge_items(doc, updates, only_missing=False)
    _merge_items(doc, defaults or {}, only_missing=True)
    return tomlkit.dumps(doc)


def update_toml_file(
    path: str | os.PathLike[str],
    updates: Mapping[str, Any],
    *,
    defaults: Mapping[str, Any] | None = None,
) -> None:
    """Apply :func:`update_toml` to the file at ``path``, in place and atomically (a
    node reading the file meanwhile sees the old or the new text, never half of it); the
    file keeps its permissions."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"file not found: {path}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read {path} ({exc})") from None
    new = update_toml(text, updates, defaults=defaults, where=str(path))
    _replace_file(path, new.encode("utf-8"), mode=path.stat().st_mode & 0o7777)


def _replace_file(path: Path, data: bytes, *, mode: int) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


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


def _write_private(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def _settings_comments(party: str) -> dict[str, str]:
    return {
        "party": "This party's name on the roster.",
        "consortium": (
            "The roster: the same file at every party. Paths in this file are relative\n"
            "to this file's folder, or absolute."
        ),
        "[tls]": "This party's identity: the roster's certificate for it, and its private key.",
        "tls.private_key": "Unencrypted PEM, readable by the node's user only (mode 0600).",
        "[node]": (
            "How the node runs. Optional: max_workers (default 64), state_dir (ledger and\n"
            f'job records; default "state/{party}"), and a [limits] table (docs/deployment.md).'
        ),
        "node.listen": "host:port to listen on (in a container: 0.0.0.0:PORT).",
        "node.job_timeout_s": "Default receive timeout of a job, in seconds.",
        "node.policy": "The owner's policy (docs/governance.md), re-read when it changes.",
        "[inputs]": "Private inputs of jobs, re-read when a job starts.",
        "[data]": (
            "Data files of jobs, re-read when a job starts (no restart needed);\n"
            "`ppdm partition --settings-dir` sets them, e.g.\n"
            f'transactions = "data/{party}.dat"'
        ),
    }


_CONSORTIUM_COMMENTS = {
    "consortium.ca_certificate": "The CA every party trusts (path relative to this file).",
    "consortium.max_message_bytes": "Largest gRPC message; larger envelopes are chunked.",
    "consortium.max_envelope_bytes": "Largest reassembled protocol message.",
}


def _write_settings(path: Path, settings: Mapping[str, Any], *, header: str) -> None:
    """Write a new settings file (mode 0600, each setting explained), or update an
    existing one (``init --force``): only the keys ``init`` sets change, ``[inputs]``
    and ``[data]`` entries the owner has are kept, and so are all comments."""
    if path.is_file():
        keep = ("inputs", "data")
        updates = {k: v for k, v in settings.items() if k not in keep}
        defaults = {k: settings[k] for k in keep if k in settings}
        try:
            text = update_toml(path.read_text(encoding="utf-8"), updates, defaults=defaults)
        except (ConfigError, UnicodeDecodeError):
            text = None  # not a settings file we can update: replace it
        if text is not None:
            _replace_file(path, text.encode("utf-8"), mode=0o600)
            return
    text = write_toml(settings, header=header, comments=_settings_comments(str(settings["party"])))
    _write_private(path, text.encode("utf-8"))


def write_party_files(
    out: Path,
    party: str,
    *,
    consortium_name: str,
    address: str,
    roster: str,
    job_timeout_s: float = DEFAULT_JOB_TIMEOUT_S,
    inputs: Mapping[str, Any] | None = None,
    policy_text: str | None = None,
) -> Path:
    """Write ``party``'s settings file ``out/PARTY.toml`` (its key and certificate at
    ``certs/PARTY.crt`` and ``private/PARTY.key``, the roster at ``roster`` relative to
    ``out``, listening on ``address``) and, with ``policy_text``, its data-owner policy
    ``out/PARTY.policy.toml`` (mode 0600) that the settings' ``[node] policy`` names.
    ``ppdm consortium init`` writes one per party, ``add-party`` one for the new member.
    Returns the settings file."""
    node: dict[str, Any] = {"listen": address, "job_timeout_s": float(job_timeout_s)}
    if policy_text is not None:
        node["policy"] = f"{party}.policy.toml"
    settings: dict[str, Any] = {
        "party": party,
        "consortium": roster,
        "tls": {"certificate": f"certs/{party}.crt", "private_key": f"private/{party}.key"},
        "node": node,
        "inputs": dict(inputs or {}),
        "data": {},
    }
    path = out / f"{party}.toml"
    _write_settings(
        path,
        settings,
        header=(
            f"Private settings of party {party!r} in consortium {consortium_name!r}.\n"
            "Keep this file, its private key and its inputs on this party's host only."
        ),
    )
    if policy_text is not None:
        _write_private(out / f"{party}.policy.toml", policy_text.encode())
    return path


def init_consortium(
    out: str | Path,
    parties: Sequence[str],
    *,
    host: str = "127.0.0.1",
    base_port: int = 50051,
    name: str = "ppdm-testbed",
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
    job_timeout_s: float = DEFAULT_JOB_TIMEOUT_S,
    sample_inputs: bool = True,
    keep_ca_key: bool = False,
    overwrite: bool = False,
    ports: Sequence[int] | None = None,
    rng: int | RandomSource | None = None,
    policy_text: str | None = None,
    ca_passphrase: bytes | None = None,
) -> Path:
    """Write a ready-to-run consortium for ``parties`` on one host; returns its file.

    Files written under ``out``: ``consortium.toml``, ``ca.crt``, ``certs/<party>.crt``,
    ``private/<party>.key`` (mode 0600), ``<party>.toml`` (settings) and, with
    ``policy_text``, ``<party>.policy.toml`` (the owner's policy, which the settings'
    ``[node] policy`` then names; ``ppdm consortium init`` passes the default policy of
    :mod:`ppdm.service.policy`, see ``docs/governance.md``). Party ``i``
    listens on ``host:base_port + i`` (or ``ports[i]``). With ``sample_inputs`` each
    party's settings get a sample private ``secure_sum`` input in ``[0, 1000)``, so a
    fresh testbed can run ``ppdm job run secure-sum`` at once. The CA's private key is
    discarded unless ``keep_ca_key`` (then ``private/ca.key``, encrypted with
    ``ca_passphrase`` when given, for changing the roster and issuing more
    certificates later; keep it offline).
    """
    out = Path(out)
    names = list(parties)
    if not names:
        raise ConfigError("--parties must list at least one party")
    for n in names:
        if not _NAME_RE.match(n):
            raise ConfigError(
                f"party name {n!r} must be a lower-case DNS label (a-z, 0-9, '-', at most 63)"
            )
    if len(set(names)) != len(names):
        raise ConfigError(f"party names must be distinct, got {names}")
    if ports is None:
        if not (base_port > 0 and base_port + len(names) - 1 < 65536):
            raise ConfigError(f"base port {base_port} leaves no room for {len(names)} parties")
        ports = [base_port + i for i in range(len(names))]
    if len(ports) != len(names):
        raise ConfigError("need one port per party")
    if max_message_bytes < MIN_MESSAGE_BYTES:
        raise ConfigError(f"max message size must be at least {MIN_MESSAGE_BYTES} bytes")
    cons_file = out / "consortium.toml"
    if out.exists() and any(out.iterdir()) and not overwrite:
        raise ConfigError(f"{out} exists and is not empty (use --force to overwrite)")
    for sub in ("certs", "private"):
        (out / sub).mkdir(parents=True, exist_ok=True)
    os.chmod(out / "private", 0o700)
    ca_key, ca_cert = generate_ca(name)
    (out / "ca.crt").write_bytes(_pem(ca_cert))
    if keep_ca_key:
        _write_private(out / "private" / "ca.key", _key_pem(ca_key, ca_passphrase))
    from ppdm.randomness import make_rng

    source = make_rng(rng)
    samples = source.integers(0, 1000, len(names)) if sample_inputs else None
    roster = []
    prints: list[tuple[str, str, str]] = []
    for i, party in enumerate(names):
        key, cert = issue_certificate(ca_key, ca_cert, party, hosts=[host])
        (out / "certs" / f"{party}.crt").write_bytes(_pem(cert))
        _write_private(out / "private" / f"{party}.key", _key_pem(key))
        address = f"[{host}]:{ports[i]}" if ":" in host else f"{host}:{ports[i]}"
        roster.append({"name": party, "address": address, "certificate": f"certs/{party}.crt"})
        prints.append((party, address, certificate_fingerprint(cert)))
        write_party_files(
            out,
            party,
            consortium_name=name,
            address=address,
            roster="consortium.toml",
            job_timeout_s=job_timeout_s,
            inputs={"secure_sum": int(samples[i])} if samples is not None else {},
            policy_text=policy_text,
        )
    doc = {
        "consortium": {
            "name": name,
            "ca_certificate": "ca.crt",
            "max_message_bytes": int(max_message_bytes),
            "max_envelope_bytes": max(DEFAULT_MAX_ENVELOPE_BYTES, int(max_message_bytes)),
            "version": 1,
            "signature": _sign_new_roster(ca_key, ca_cert, name, int(max_message_bytes), prints),
        },
        "parties": roster,
    }
    cons_file.write_text(
        write_toml(
            doc,
            header=(
                f"Roster of consortium {name!r}: the same file at every party.\n"
                "A peer is accepted only with exactly the certificate listed for it here."
            ),
            comments=_CONSORTIUM_COMMENTS,
        )
    )
    return cons_file
