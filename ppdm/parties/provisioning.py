"""Writing a new consortium: its CA, each party's key, certificate and settings file,
and the signed roster (``ppdm consortium init``; ``add-party`` writes one more party's
files).

The files' format is in :mod:`ppdm.parties.consortium`.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec

from ppdm.errors import ConfigError
from ppdm.parties.certificates import (
    _key_pem,
    _pem,
    certificate_fingerprint,
    generate_ca,
    issue_certificate,
)
from ppdm.parties.consortium_file import (
    _NAME_RE,
    DEFAULT_MAX_ENVELOPE_BYTES,
    DEFAULT_MAX_MESSAGE_BYTES,
    MIN_MESSAGE_BYTES,
    roster_payload,
    sign_payload,
)
from ppdm.parties.settings_file import DEFAULT_JOB_TIMEOUT_S
from ppdm.parties.tomlfiles import _replace_file, _write_private, update_toml, write_toml

if TYPE_CHECKING:
    from ppdm.randomness import RandomSource

__all__ = ["init_consortium", "write_party_files"]


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
