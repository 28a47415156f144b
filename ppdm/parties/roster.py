"""Roster changes signed by the consortium CA: add a party, remove one, rotate a
certificate, re-sign; and the rule by which a node accepts a new roster.

A roster (the consortium file) carries a ``version`` and the CA's ECDSA signature over
its meaning (:func:`ppdm.parties.consortium.roster_payload`: name, version, size limits,
the CA and every member's name, address and certificate fingerprint). Every change made
here increments the version and signs it again with the CA key, which the consortium's
operator keeps offline (``ppdm consortium init --keep-ca-key --ca-passphrase-env VAR``
writes it encrypted).

A node accepts a roster pushed by any member (``ppdm consortium push``) or read from its
own disk on SIGHUP only when :func:`check_successor` allows it: the same consortium name
and CA, a valid signature, and a *higher* version. It then pins the new certificates
at once, inbound and outbound (see ``docs/deployment.md``). Rosters sent between nodes
are self-contained (:func:`roster_toml`: inline PEMs).
"""

from __future__ import annotations

import base64
import os
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from ppdm.errors import ConfigError
from ppdm.parties.consortium import (
    _NAME_RE,
    Consortium,
    PartyEntry,
    _check_address,
    _key_pem,
    _pem,
    _write_private,
    certificate_fingerprint,
    issue_certificate,
    load_consortium,
    sign_payload,
    write_party_files,
    write_toml,
)

__all__ = [
    "add_party",
    "check_successor",
    "load_ca_key",
    "next_address",
    "remove_party",
    "roster_toml",
    "rotate_certificate",
    "sign_roster",
]


def load_ca_key(path: str | Path, passphrase: bytes | None = None) -> ec.EllipticCurvePrivateKey:
    """The CA's private key from a PEM file (encrypted with ``passphrase`` or not)."""
    path = Path(path)
    if not path.exists():
        raise ConfigError(
            f"no CA key at {path}: `ppdm consortium init` keeps the CA's private key only "
            "when asked (--ca-passphrase-env VAR: private/ca.key encrypted with the "
            "passphrase in VAR; --keep-ca-key: unencrypted). Without it this roster can "
            "never change: give --ca-key the path where you keep the key"
        )
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read the CA key {path} ({exc.strerror})") from None
    try:
        key = serialization.load_pem_private_key(data, password=passphrase or None)
    except TypeError:
        raise ConfigError(
            f"the CA key {path} is encrypted: give its passphrase (--ca-passphrase-env VAR)"
            if not passphrase
            else f"the CA key {path} is not encrypted: give no passphrase"
        ) from None
    except ValueError:
        raise ConfigError(
            f"the CA key {path} cannot be read (a wrong passphrase, or not a PEM key)"
        ) from None
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise ConfigError(f"the CA key {path} is not an EC key")
    return key


def _ca_cert(consortium: Consortium) -> x509.Certificate:
    return x509.load_pem_x509_certificate(consortium.ca_certificate_pem)


def _check_ca_key(consortium: Consortium, ca_key: ec.EllipticCurvePrivateKey) -> None:
    pub = serialization.PublicFormat.SubjectPublicKeyInfo
    der = serialization.Encoding.DER
    if ca_key.public_key().public_bytes(der, pub) != _ca_cert(consortium).public_key().public_bytes(
        der, pub
    ):
        raise ConfigError("the CA key does not belong to the consortium's CA certificate")


def _signed(consortium: Consortium, ca_key: ec.EllipticCurvePrivateKey) -> Consortium:
    """``consortium`` with the next version, signed."""
    _check_ca_key(consortium, ca_key)
    nxt = replace(consortium, version=consortium.version + 1, signature=None)
    return replace(nxt, signature=sign_payload(ca_key, nxt.payload()))


def roster_toml(consortium: Consortium, *, base: Path | None = None) -> str:
    """The TOML text of a roster. Self-contained (every PEM inline) as nodes exchange
    it; with ``base`` (the roster file's folder), a certificate that a file there holds
    (``ca.crt``, ``certs/NAME.crt``, as ``ppdm consortium init`` lays them out) is named
    by its path instead, so the file keeps its layout."""

    def pem_or_path(pem: bytes, relative: str) -> str:
        if base is not None:
            try:
                on_disk = (base / relative).read_bytes()
            except OSError:
                on_disk = b""
            if on_disk and certificate_fingerprint(on_disk) == certificate_fingerprint(pem):
                return relative
        return pem.decode()

    doc = {
        "consortium": {
            "name": consortium.name,
            "version": consortium.version,
            "max_message_bytes": consortium.max_message_bytes,
            "max_envelope_bytes": consortium.max_envelope_bytes,
            "ca_certificate": pem_or_path(consortium.ca_certificate_pem, "ca.crt"),
            **(
                {"signature": base64.b64encode(consortium.signature).decode()}
                if consortium.signature is not None
                else {}
            ),
        },
        "parties": [
            {
                "name": p.name,
                "address": p.address,
                "certificate": pem_or_path(p.certificate_pem, f"certs/{p.name}.crt"),
            }
            for p in consortium.parties
        ],
    }
    return write_toml(
        doc,
        header=(
            f"Roster of consortium {consortium.name!r}, version {consortium.version}, signed "
            "by the consortium CA.\nThe same file at every party; change it only with "
            "`ppdm consortium add-party | remove-party | rotate-cert | sign`."
        ),
    )


def _write_roster(path: Path, consortium: Consortium) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(roster_toml(consortium, base=path.parent))
    os.replace(tmp, path)


def _entry(name: str, address: str, cert: x509.Certificate) -> PartyEntry:
    return PartyEntry(
        name,
        address,
        _pem(cert),
        certificate_fingerprint(cert),
        cert.not_valid_before_utc,
        cert.not_valid_after_utc,
    )


def _issue(
    consortium: Consortium,
    ca_key: ec.EllipticCurvePrivateKey,
    name: str,
    address: str,
    out: Path,
    validity_days: int,
) -> x509.Certificate:
    host = address.rsplit(":", 1)[0].strip("[]")
    key, cert = issue_certificate(
        ca_key, _ca_cert(consortium), name, hosts=[host], validity_days=validity_days
    )
    (out / "certs").mkdir(parents=True, exist_ok=True)
    (out / "private").mkdir(parents=True, exist_ok=True)
    os.chmod(out / "private", 0o700)
    (out / "certs" / f"{name}.crt").write_bytes(_pem(cert))
    _write_private(out / "private" / f"{name}.key", _key_pem(key))
    return cert


def sign_roster(path: str | Path, ca_key: ec.EllipticCurvePrivateKey) -> Consortium:
    """Re-sign a roster file after a change made by hand (the next version)."""
    path = Path(path)
    new = _signed(load_consortium(path, verify_signature=False), ca_key)
    _write_roster(path, new)
    return new


def add_party(
    path: str | Path,
    ca_key: ec.EllipticCurvePrivateKey,
    name: str,
    address: str,
    *,
    out: str | Path | None = None,
    validity_days: int = 365,
    policy_text: str | None = None,
    listen: str | None = None,
    inputs: dict[str, Any] | None = None,
) -> Consortium:
    """Issue a key and certificate for a new member (``OUT/certs/NAME.crt``,
    ``OUT/private/NAME.key``), add it to the roster file, sign the next version, and
    write the new member's settings ``OUT/NAME.toml`` (listening on ``listen``, default
    ``address``; naming the roster file) and, with ``policy_text``, its policy
    ``OUT/NAME.policy.toml``: the member starts with ``ppdm party serve OUT/NAME.toml``
    once it holds these files (docs/deployment.md)."""
    path = Path(path)
    current = load_consortium(path)
    if not _NAME_RE.match(name):
        raise ConfigError(f"party name {name!r} must be a lower-case DNS label")
    if name in current.names:
        raise ConfigError(f"{name!r} is already a member (rotate-cert replaces its certificate)")
    address = _check_address(address, "--address")
    if address in {p.address for p in current.parties}:
        raise ConfigError(f"address {address} is used by another member")
    _check_ca_key(current, ca_key)
    folder = Path(out or path.parent)
    if (folder / f"{name}.toml").exists():
        raise ConfigError(f"{folder / (name + '.toml')} exists: not overwritten")
    cert = _issue(current, ca_key, name, address, folder, validity_days)
    new = _signed(replace(current, parties=(*current.parties, _entry(name, address, cert))), ca_key)
    _write_roster(path, new)
    write_party_files(
        folder,
        name,
        consortium_name=new.name,
        address=listen or address,
        roster=os.path.relpath(path.resolve(), folder.resolve()),
        inputs=inputs,
        policy_text=policy_text,
    )
    return new


def next_address(consortium: Consortium) -> str:
    """The address after the roster's last member on the same host (port + 1, skipping
    ports in use by members): the default of ``add-party`` on one machine."""
    last = consortium.parties[-1].address
    host, _, port = last.rpartition(":")
    used = {p.address for p in consortium.parties}
    n = int(port) + 1
    while f"{host}:{n}" in used:
        n += 1
    if n > 65535:
        raise ConfigError("no port left after the last member's: give --address HOST:PORT")
    return f"{host}:{n}"


def remove_party(path: str | Path, ca_key: ec.EllipticCurvePrivateKey, name: str) -> Consortium:
    """Remove a member from the roster file and sign the next version (its certificate
    stops working at every node that takes the new roster)."""
    path = Path(path)
    current = load_consortium(path)
    if name not in current.names:
        raise ConfigError(f"{name!r} is not a member of {current.name!r}")
    if len(current.parties) == 1:
        raise ConfigError("cannot remove the last member")
    parties = tuple(p for p in current.parties if p.name != name)
    new = _signed(replace(current, parties=parties), ca_key)
    _write_roster(path, new)
    return new


def rotate_certificate(
    path: str | Path,
    ca_key: ec.EllipticCurvePrivateKey,
    name: str,
    *,
    out: str | Path | None = None,
    validity_days: int = 365,
) -> Consortium:
    """A new key and certificate for a member (written over ``OUT/certs/NAME.crt`` and
    ``OUT/private/NAME.key``), the roster file updated and signed: the old certificate
    stops working at every node that takes the new roster."""
    path = Path(path)
    current = load_consortium(path)
    entry = current.party(name)
    cert = _issue(current, ca_key, name, entry.address, Path(out or path.parent), validity_days)
    parties = tuple(
        _entry(name, entry.address, cert) if p.name == name else p for p in current.parties
    )
    new = _signed(replace(current, parties=parties), ca_key)
    _write_roster(path, new)
    return new


def check_successor(current: Consortium, new: Consortium) -> None:
    """Raise :class:`ConfigError` unless a node holding ``current`` may take ``new``: the
    same consortium and CA, signed (the signature was verified when ``new`` was
    loaded), and a higher version."""
    if new.name != current.name:
        raise ConfigError(f"the roster is for consortium {new.name!r}, not {current.name!r}")
    if new.ca_fingerprint != current.ca_fingerprint:
        raise ConfigError("the roster names another certificate authority")
    if not new.signed:
        raise ConfigError("the roster is not signed by the consortium CA")
    if new.version <= current.version:
        raise ConfigError(
            f"the roster's version {new.version} is not newer than this node's "
            f"version {current.version}"
        )


def members_changed(current: Consortium, new: Consortium) -> Sequence[str]:
    """Members added, removed or whose certificate or address changed."""
    old = {p.name: (p.address, p.fingerprint) for p in current.parties}
    cur = {p.name: (p.address, p.fingerprint) for p in new.parties}
    return sorted(n for n in old.keys() | cur.keys() if old.get(n) != cur.get(n))
