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

The code is in five modules, every name re-exported here: :mod:`~ppdm.parties.certificates`
(X.509), :mod:`~ppdm.parties.tomlfiles` (reading and writing TOML),
:mod:`~ppdm.parties.consortium_file` (the roster), :mod:`~ppdm.parties.settings_file` (a
party's settings and node limits) and :mod:`~ppdm.parties.provisioning` (writing a new
consortium).
"""

from ppdm.parties.certificates import _key_pem as _key_pem
from ppdm.parties.certificates import _pem as _pem
from ppdm.parties.certificates import certificate_fingerprint as certificate_fingerprint
from ppdm.parties.certificates import certificate_names as certificate_names
from ppdm.parties.certificates import generate_ca as generate_ca
from ppdm.parties.certificates import issue_certificate as issue_certificate
from ppdm.parties.consortium_file import _NAME_RE as _NAME_RE
from ppdm.parties.consortium_file import DEFAULT_MAX_ENVELOPE_BYTES as DEFAULT_MAX_ENVELOPE_BYTES
from ppdm.parties.consortium_file import DEFAULT_MAX_MESSAGE_BYTES as DEFAULT_MAX_MESSAGE_BYTES
from ppdm.parties.consortium_file import MIN_MESSAGE_BYTES as MIN_MESSAGE_BYTES
from ppdm.parties.consortium_file import Consortium as Consortium
from ppdm.parties.consortium_file import PartyEntry as PartyEntry
from ppdm.parties.consortium_file import _check_address as _check_address
from ppdm.parties.consortium_file import load_consortium as load_consortium
from ppdm.parties.consortium_file import loads_consortium as loads_consortium
from ppdm.parties.consortium_file import roster_payload as roster_payload
from ppdm.parties.consortium_file import sign_payload as sign_payload
from ppdm.parties.provisioning import init_consortium as init_consortium
from ppdm.parties.provisioning import write_party_files as write_party_files
from ppdm.parties.settings_file import DEFAULT_JOB_TIMEOUT_S as DEFAULT_JOB_TIMEOUT_S
from ppdm.parties.settings_file import DEFAULT_MAX_WORKERS as DEFAULT_MAX_WORKERS
from ppdm.parties.settings_file import NodeLimits as NodeLimits
from ppdm.parties.settings_file import PartySettings as PartySettings
from ppdm.parties.settings_file import load_settings as load_settings
from ppdm.parties.settings_file import reload_party_tables as reload_party_tables
from ppdm.parties.tomlfiles import _write_private as _write_private
from ppdm.parties.tomlfiles import update_toml as update_toml
from ppdm.parties.tomlfiles import update_toml_file as update_toml_file
from ppdm.parties.tomlfiles import write_toml as write_toml

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
