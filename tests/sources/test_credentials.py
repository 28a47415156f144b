"""Credentials of SQL sources (issue 17): the password is never in the settings, is read
from an environment variable or a private file (a file that group or others can read is
refused), and no error message shows it."""

from __future__ import annotations

import os

import pytest

from ppdm.errors import ConfigError
from ppdm.sources import SqlSource, open_source, parse_data_entry, resolve_password
from ppdm.testbed.consortia import free_ports

SECRET = "s3cr3t-Pa55-w0rd-17"


def _free_port() -> int:
    return free_ports(1)[0]


def _entry(**extra):
    return {"kind": "sql", "url": "postgresql://reader@127.0.0.1:1/shop", "table": "t", **extra}


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o660, 0o700 | 0o010])
def test_a_password_file_readable_by_others_is_refused(tmp_path, mode):
    secret = tmp_path / "pw"
    secret.write_text(SECRET + "\n")
    os.chmod(secret, mode)
    spec = parse_data_entry("t", _entry(password_file="pw"), base_dir=tmp_path)
    with pytest.raises(ConfigError, match="group or others") as err:
        resolve_password(spec)
    assert SECRET not in str(err.value)


@pytest.mark.parametrize("mode", [0o600, 0o400])
def test_a_private_password_file_is_read(tmp_path, mode):
    secret = tmp_path / "pw"
    secret.write_text(SECRET + "\n")
    os.chmod(secret, mode)
    spec = parse_data_entry("t", _entry(password_file=str(secret)), base_dir=tmp_path)
    assert resolve_password(spec) == SECRET


def test_a_password_file_of_another_user_is_refused(tmp_path, tier_unavailable):
    if os.geteuid() != 0:
        tier_unavailable("root", "needs root to give the file to another user")
    secret = tmp_path / "pw"
    secret.write_text(SECRET)
    os.chmod(secret, 0o600)
    os.chown(secret, 65534, 65534)
    spec = parse_data_entry("t", _entry(password_file="pw"), base_dir=tmp_path)
    with pytest.raises(ConfigError, match="another user"):
        resolve_password(spec)


def test_password_from_the_environment(tmp_path, monkeypatch):
    spec = parse_data_entry("t", _entry(password_env="PPDM_TEST_PW"), base_dir=tmp_path)
    monkeypatch.delenv("PPDM_TEST_PW", raising=False)
    with pytest.raises(ConfigError, match="PPDM_TEST_PW"):
        resolve_password(spec)
    monkeypatch.setenv("PPDM_TEST_PW", SECRET)
    assert resolve_password(spec) == SECRET


@pytest.mark.parametrize(
    "entry",
    [
        _entry(url=f"postgresql://reader:{SECRET}@db/shop"),
        _entry(url=f"postgresql://reader@db/shop?password={SECRET}"),
        _entry(password=SECRET),
        _entry(Password=SECRET),
    ],
)
def test_a_password_in_the_settings_is_refused_without_echoing_it(tmp_path, entry):
    with pytest.raises(ConfigError, match="password") as err:
        parse_data_entry("t", entry, base_dir=tmp_path)
    assert SECRET not in str(err.value)


def test_a_failed_connection_does_not_show_the_password(tmp_path, monkeypatch, caplog):
    """Nothing listens on the port: the driver fails; neither the error nor the log line
    holds the password, and the driver's own message is only in the node's log."""
    port = _free_port()
    monkeypatch.setenv("PPDM_TEST_PW", SECRET)
    entry = _entry(url=f"postgresql://reader@127.0.0.1:{port}/shop", password_env="PPDM_TEST_PW")
    src = open_source({"t": entry}, "t", base_dir=tmp_path, party="alice")
    assert isinstance(src, SqlSource)
    with caplog.at_level("WARNING"), pytest.raises(ConfigError, match="refused") as err:
        src.transactions()
    assert SECRET not in str(err.value) and SECRET not in caplog.text
    assert "OperationalError" in str(err.value)


def test_a_driver_message_quoting_the_password_is_masked(tmp_path, caplog):
    spec = parse_data_entry("t", _entry(), base_dir=tmp_path)
    src = SqlSource(spec)
    src._password = SECRET
    with caplog.at_level("WARNING"):
        err = src._failure(RuntimeError(f"bad login for password {SECRET}"))
    assert SECRET not in str(err) and SECRET not in caplog.text
    assert "***" in caplog.text
