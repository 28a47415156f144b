"""Consortium files, settings files, certificates and identities (no network)."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from hypothesis import given
from hypothesis import strategies as st

from ppdm.errors import ConfigError
from ppdm.parties.consortium import (
    certificate_fingerprint,
    generate_ca,
    init_consortium,
    issue_certificate,
    load_consortium,
    load_settings,
    write_toml,
)

PARTIES = ["alice", "bob", "carol"]


@pytest.fixture(scope="module")
def cons_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("consortium")
    init_consortium(out, PARTIES, base_port=50100, keep_ca_key=True, rng=7)
    return out


def _pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def test_init_writes_a_loadable_consortium(cons_dir):
    cons = load_consortium(cons_dir / "consortium.toml")
    assert cons.names == tuple(PARTIES)
    assert [p.address for p in cons.parties] == [f"127.0.0.1:{50100 + i}" for i in range(3)]
    for p in PARTIES:
        s = load_settings(cons_dir / f"{p}.toml")
        assert s.name == p
        assert s.listen == cons.party(p).address
        assert isinstance(s.raw["inputs"]["secure_sum"], int)
        assert 0 <= s.raw["inputs"]["secure_sum"] < 1000
        # Private files are readable by the owner only.
        assert (cons_dir / "private" / f"{p}.key").stat().st_mode & 0o077 == 0
        assert (cons_dir / f"{p}.toml").stat().st_mode & 0o077 == 0
    # The roster never holds private keys or inputs.
    text = (cons_dir / "consortium.toml").read_text()
    assert "PRIVATE" not in text and "inputs" not in text and "secure_sum" not in text


def test_certificates_name_the_party_and_host(cons_dir):
    cert = x509.load_pem_x509_certificate((cons_dir / "certs" / "bob.crt").read_bytes())
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == ["bob"]
    assert [str(ip) for ip in san.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    ca = x509.load_pem_x509_certificate((cons_dir / "ca.crt").read_bytes())
    cert.verify_directly_issued_by(ca)


def test_identify_accepts_only_the_roster_certificate(cons_dir):
    cons = load_consortium(cons_dir / "consortium.toml")
    for p in PARTIES:
        assert cons.identify((cons_dir / "certs" / f"{p}.crt").read_bytes()) == p
    # A second certificate the same CA issued for alice is not alice's roster certificate.
    ca_key = serialization.load_pem_private_key(
        (cons_dir / "private" / "ca.key").read_bytes(), None
    )
    ca = x509.load_pem_x509_certificate((cons_dir / "ca.crt").read_bytes())
    _, rogue = issue_certificate(ca_key, ca, "alice", hosts=["127.0.0.1"])
    assert cons.identify(_pem(rogue)) is None
    _, mallory = issue_certificate(ca_key, ca, "mallory")
    assert cons.identify(_pem(mallory)) is None
    # A certificate from another CA, even with alice's name.
    other_key, other_ca = generate_ca("other")
    _, foreign = issue_certificate(other_key, other_ca, "alice")
    assert cons.identify(_pem(foreign)) is None
    assert cons.identify(b"not a certificate") is None


def test_identify_checks_the_name_too(cons_dir, tmp_path):
    # A roster that lists bob's certificate under alice's name is refused on load, and
    # identify() never maps a certificate to a name it does not carry.
    doc = tomllib.loads((cons_dir / "consortium.toml").read_text())
    doc["consortium"]["ca_certificate"] = str(cons_dir / "ca.crt")
    for row in doc["parties"]:
        row["certificate"] = str(cons_dir / "certs" / "bob.crt")
    (tmp_path / "c.toml").write_text(write_toml(doc))
    with pytest.raises(ConfigError, match="names \\['bob', 'bob'\\], not 'alice'"):
        load_consortium(tmp_path / "c.toml")


def _rewrite(cons_dir: Path, tmp_path: Path, edit) -> Path:
    doc = tomllib.loads((cons_dir / "consortium.toml").read_text())
    doc["consortium"]["ca_certificate"] = str(cons_dir / "ca.crt")
    for row in doc["parties"]:
        row["certificate"] = str(cons_dir / row["certificate"])
    edit(doc)
    path = tmp_path / "consortium.toml"
    path.write_text(write_toml(doc))
    return path


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: d["parties"].append(dict(d["parties"][0])), "listed twice"),
        (lambda d: d["parties"][1].update(address=d["parties"][0]["address"]), "used by another"),
        (lambda d: d["parties"][0].update(name="Alice"), "DNS label"),
        (lambda d: d["parties"][0].update(address="127.0.0.1"), "host:port"),
        (lambda d: d["parties"][0].update(address="h:70000"), "host:port"),
        (lambda d: d["parties"][0].update(certificate="/nonexistent.crt"), "file not found"),
        (lambda d: d["consortium"].pop("name"), "consortium.name"),
        (lambda d: d["consortium"].update(max_message_bytes=10), "max_message_bytes"),
        (lambda d: d.pop("parties"), "no \\[\\[parties\\]\\]"),
        (lambda d: d.pop("consortium"), "missing \\[consortium\\]"),
    ],
)
def test_bad_consortium_files_give_clear_errors(cons_dir, tmp_path, edit, message):
    path = _rewrite(cons_dir, tmp_path, edit)
    with pytest.raises(ConfigError, match=message):
        load_consortium(path)


def test_certificate_from_another_ca_is_refused_on_load(cons_dir, tmp_path):
    other_key, other_ca = generate_ca("other")
    _, cert = issue_certificate(other_key, other_ca, "alice")
    (tmp_path / "alice.crt").write_bytes(_pem(cert))
    path = _rewrite(
        cons_dir,
        tmp_path,
        lambda d: d["parties"][0].update(certificate=str(tmp_path / "alice.crt")),
    )
    with pytest.raises(ConfigError, match="not signed by the consortium CA"):
        load_consortium(path)


def test_settings_checks(cons_dir, tmp_path):
    doc = tomllib.loads((cons_dir / "alice.toml").read_text())

    def write(d) -> Path:
        d = dict(d)
        d["consortium"] = str(cons_dir / "consortium.toml")
        d["tls"] = {k: str(cons_dir / v) for k, v in d["tls"].items()}
        p = tmp_path / "s.toml"
        p.write_text(write_toml(d))
        return p

    assert load_settings(write(doc)).name == "alice"
    bad = dict(doc, tls={"certificate": "certs/bob.crt", "private_key": "private/bob.key"})
    with pytest.raises(ConfigError, match="not the certificate the consortium file lists"):
        load_settings(write(bad))
    bad = dict(doc, tls={"certificate": "certs/alice.crt", "private_key": "private/bob.key"})
    with pytest.raises(ConfigError, match="does not belong"):
        load_settings(write(bad))
    with pytest.raises(ConfigError, match="not in consortium"):
        load_settings(write(dict(doc, party="dave")))
    with pytest.raises(ConfigError, match="job_timeout_s"):
        load_settings(write(dict(doc, node={"job_timeout_s": -1})))
    (tmp_path / "broken.toml").write_text("party = [")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_settings(tmp_path / "broken.toml")
    with pytest.raises(ConfigError, match="file not found"):
        load_settings(tmp_path / "missing.toml")


def test_init_refuses_bad_input(tmp_path):
    with pytest.raises(ConfigError, match="distinct"):
        init_consortium(tmp_path / "a", ["alice", "alice"])
    with pytest.raises(ConfigError, match="DNS label"):
        init_consortium(tmp_path / "b", ["alice", "Bob_1"])
    with pytest.raises(ConfigError, match="base port"):
        init_consortium(tmp_path / "c", ["alice", "bob"], base_port=65535)
    init_consortium(tmp_path / "d", ["alice"])
    with pytest.raises(ConfigError, match="not empty"):
        init_consortium(tmp_path / "d", ["alice"])


def test_ca_key_is_not_written_by_default(tmp_path):
    init_consortium(tmp_path, ["alice", "bob"])
    assert not (tmp_path / "private" / "ca.key").exists()
    a = certificate_fingerprint((tmp_path / "certs" / "alice.crt").read_bytes())
    b = certificate_fingerprint((tmp_path / "certs" / "bob.crt").read_bytes())
    assert a != b and len(a) == 64


_key = st.from_regex(r"[a-z][a-z0-9_]{0,8}", fullmatch=True)
_scalar = (
    st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
)


@given(
    st.dictionaries(_key, _scalar | st.lists(st.integers(-100, 100), max_size=4), max_size=4),
    st.dictionaries(_key, st.dictionaries(_key, _scalar, max_size=3), max_size=3),
)
def test_write_toml_round_trips(scalars, tables):
    doc = {**scalars, **{k: v for k, v in tables.items() if k not in scalars}}
    assert tomllib.loads(write_toml(doc, header="a\nb")) == doc
