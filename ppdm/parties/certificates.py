"""X.509 for a consortium: its CA, each party's key and certificate, fingerprints and names.

A party's identity on the network is the certificate the roster lists for it (compared by
SHA-256 fingerprint) and the party name it carries (DNS subject alternative name or
common name); see :mod:`ppdm.parties.consortium` for the files that hold them.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import ipaddress
from collections.abc import Sequence

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from ppdm.errors import ConfigError

__all__ = [
    "certificate_fingerprint",
    "certificate_names",
    "generate_ca",
    "issue_certificate",
]


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
