"""Signed ledger heads: a member's signed statement "my ledger has this hash at entry
``seq``", which every node sends its peers with every job (:mod:`ppdm.service.ledger`,
``docs/ledger.md``): signing one, checking one a peer sent (peer input: a
:class:`~ppdm.errors.ProtocolError` with a fixed reason), and its protobuf form.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from typing import Any

from ppdm.errors import ConfigError, ProtocolError
from ppdm.service.ledger_chain import HEAD_PAGE as HEAD_PAGE
from ppdm.service.ledger_chain import MAX_CONFLICTS_SENT as MAX_CONFLICTS_SENT
from ppdm.service.ledger_chain import MAX_HEAD_SEQ as MAX_HEAD_SEQ

MAX_SIGNATURE_BYTES = 1024
_HEX64 = re.compile(r"[0-9a-f]{64}")
_HEAD_DOMAIN = b"ppdm.ledger-head/1\n"


@dataclass(frozen=True)
class SignedHead:
    """A member's signed statement "my ledger has ``hash`` at entry ``seq``"."""

    party: str
    seq: int
    hash: str
    signature: bytes

    def as_record(self) -> dict[str, Any]:
        return {
            "party": self.party,
            "seq": self.seq,
            "hash": self.hash,
            "signature": self.signature.hex(),
        }


def head_payload(consortium: str, party: str, seq: int, digest: str) -> bytes:
    """The bytes a head's signature covers (domain-separated; the consortium name keeps a
    head from being replayed in another consortium)."""
    return _HEAD_DOMAIN + json.dumps([consortium, party, int(seq), digest]).encode()


@functools.lru_cache(maxsize=8)
def _private_key(pem: bytes) -> Any:
    from cryptography.hazmat.primitives import serialization

    try:
        return serialization.load_pem_private_key(pem, password=None)
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"the party key cannot sign ledger heads ({exc})") from None


@functools.lru_cache(maxsize=64)
def _public_key(certificate_pem: bytes) -> Any:
    from cryptography import x509

    return x509.load_pem_x509_certificate(certificate_pem).public_key()


def _sign(key: Any, payload: bytes) -> bytes:
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec, ed448, ed25519, padding, rsa

    if isinstance(key, ec.EllipticCurvePrivateKey):
        return key.sign(payload, ec.ECDSA(hashes.SHA256()))
    if isinstance(key, ed25519.Ed25519PrivateKey | ed448.Ed448PrivateKey):
        return key.sign(payload)
    if isinstance(key, rsa.RSAPrivateKey):
        pss = padding.PSS(mgf=padding.MGF1(hashes.SHA256()), salt_length=32)
        return key.sign(payload, pss, hashes.SHA256())
    raise ConfigError(f"a {type(key).__name__} party key cannot sign ledger heads")


def sign_head(
    private_key_pem: bytes, *, consortium: str, party: str, seq: int, digest: str
) -> SignedHead:
    """Sign ``party``'s head ``(seq, digest)`` with its TLS private key (ECDSA P-256 with
    SHA-256 for the keys ``ppdm consortium init`` makes; Ed25519/Ed448 and RSA-PSS too)."""
    key = _private_key(bytes(private_key_pem))
    signature = _sign(key, head_payload(consortium, party, seq, digest))
    return SignedHead(party, int(seq), digest, signature)


def head_signed_by(head: SignedHead, *, consortium: str, certificate_pem: bytes) -> bool:
    """Whether ``head`` carries a valid signature by the key of ``certificate_pem``."""
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec, ed448, ed25519, padding, rsa

    try:
        public = _public_key(bytes(certificate_pem))
    except ValueError:
        return False
    payload = head_payload(consortium, head.party, head.seq, head.hash)
    try:
        if isinstance(public, ec.EllipticCurvePublicKey):
            public.verify(head.signature, payload, ec.ECDSA(hashes.SHA256()))
        elif isinstance(public, ed25519.Ed25519PublicKey | ed448.Ed448PublicKey):
            public.verify(head.signature, payload)
        elif isinstance(public, rsa.RSAPublicKey):
            pss = padding.PSS(mgf=padding.MGF1(hashes.SHA256()), salt_length=32)
            public.verify(head.signature, payload, pss, hashes.SHA256())
        else:
            return False
    except (InvalidSignature, ValueError):
        return False
    return True


def check_head(head: SignedHead, *, consortium: Any, sender: str) -> None:
    """Validate a head ``sender`` sent (peer input): it must be the sender's own, well
    formed, and signed by the key of the sender's roster certificate. Raises
    :class:`~ppdm.errors.ProtocolError` with a fixed reason."""
    if head.party != sender:
        raise ProtocolError(sender, "ledger-head", "the head is not the sender's own")
    if not 1 <= head.seq <= MAX_HEAD_SEQ or not _HEX64.fullmatch(head.hash):
        raise ProtocolError(sender, "ledger-head", "malformed head")
    if not 0 < len(head.signature) <= MAX_SIGNATURE_BYTES:
        raise ProtocolError(sender, "ledger-head", "malformed signature")
    try:
        cert = consortium.party(sender).certificate_pem
    except ConfigError:
        raise ProtocolError(sender, "ledger-head", "the sender is not on the roster") from None
    if not head_signed_by(head, consortium=consortium.name, certificate_pem=cert):
        raise ProtocolError(
            sender, "ledger-head", "the signature is not by the sender's roster certificate"
        )


def head_to_proto(head: SignedHead) -> Any:
    from ppdm.proto.ppdm.v1 import party_pb2 as pb

    return pb.LedgerHead(party=head.party, seq=head.seq, hash=head.hash, signature=head.signature)


def head_from_proto(msg: Any) -> SignedHead | None:
    """A ``LedgerHead`` message as a :class:`SignedHead`; ``None`` if it is unset."""
    if msg is None or (not msg.party and not msg.seq and not msg.hash and not msg.signature):
        return None
    return SignedHead(str(msg.party), int(msg.seq), str(msg.hash), bytes(msg.signature))
