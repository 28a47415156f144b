"""The consortium file (the roster), loaded and checked: :class:`Consortium`, its
:class:`PartyEntry` lines, and the canonical payload the consortium CA signs.

The file's format is in :mod:`ppdm.parties.consortium`.
"""

from __future__ import annotations

import base64
import datetime as _dt
import json
import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec

from ppdm.errors import ConfigError
from ppdm.parties.certificates import _load_cert, certificate_fingerprint, certificate_names
from ppdm.parties.tomlfiles import _read_toml

__all__ = [
    "DEFAULT_MAX_ENVELOPE_BYTES",
    "DEFAULT_MAX_MESSAGE_BYTES",
    "Consortium",
    "PartyEntry",
    "load_consortium",
    "loads_consortium",
    "roster_payload",
    "sign_payload",
]

DEFAULT_MAX_MESSAGE_BYTES = 4 * 1024 * 1024
DEFAULT_MAX_ENVELOPE_BYTES = 512 * 1024 * 1024
MIN_MESSAGE_BYTES = 16 * 1024


# Party names travel in certificates as DNS names, so they are DNS labels.
_NAME_RE = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$")


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
        # consortium.payload(), from the CA parsed above (each certificate parsed once)
        payload = roster_payload(
            name,
            version,
            max_msg,
            max_env,
            certificate_fingerprint(ca),
            [(p.name, p.address, p.fingerprint) for p in entries],
        )
        _verify_roster(ca, payload, signature, str(path))
    return consortium
