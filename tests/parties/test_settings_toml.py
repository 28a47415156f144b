"""Settings files written with tomlkit: owners' comments and layout survive updates, and a
node sees a new data file at its next job without a restart (issue 16, item 3)."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ppdm.errors import ConfigError
from ppdm.jobs.mining import read_party_transactions, set_party_data
from ppdm.jobs.registry import PartyContext
from ppdm.mining.readers import read_fimi
from ppdm.parties.consortium import (
    init_consortium,
    load_settings,
    reload_party_tables,
    update_toml,
    update_toml_file,
    write_toml,
)

PARTIES = ["alice", "bob", "carol"]

# A settings file as an owner might have edited it: comments everywhere, odd spacing,
# an inline table, a dotted key, a source sub-table and keys ppdm does not know.
OWNER_TEXT = """\
# Alice's node -- edited by hand, do not lose these notes!
party   = "alice"        # our name
consortium = "consortium.toml"
owner_note = "ops ticket 4711"

[tls]   # rotated 2026-01
certificate = "certs/alice.crt"
private_key = "private/alice.key"

[node]
listen = "127.0.0.1:50051"
state_dir = "state/alice"   # on the big disk
extra = { retries = 3, verbose = true }

[inputs]
secure_sum = 42   # our private number

[data]
# the marketing extract; refreshed weekly
customers = "data/customers.csv"
limits.note = "dotted"

[data.warehouse]
kind = "parquet"
path = "/srv/baskets/"
transaction_column = "tid"
item_column = "item"

# trailing note
"""


def _diff(old: str, new: str) -> tuple[list[str], list[str]]:
    """Lines only in ``old``, lines only in ``new`` (as multisets, order-free)."""
    a, b = old.splitlines(), new.splitlines()
    gone = list(a)
    added = []
    for line in b:
        if line in gone:
            gone.remove(line)
        else:
            added.append(line)
    return gone, added


@pytest.fixture
def cons_dir(tmp_path: Path) -> Path:
    out = tmp_path / "net"
    init_consortium(out, PARTIES, base_port=50300, rng=3, policy_text="")
    return out


def test_set_party_data_changes_only_its_entry(tmp_path: Path) -> None:
    path = tmp_path / "alice.toml"
    path.write_text(OWNER_TEXT)
    os.chmod(path, 0o600)
    data = tmp_path / "data" / "alice.dat"
    data.parent.mkdir()
    data.write_text("1 2\n")
    before = tomllib.loads(OWNER_TEXT)

    set_party_data(path, "transactions", data)
    text = path.read_text()
    gone, added = _diff(OWNER_TEXT, text)
    assert gone == []  # every line of the owner's file is still there, comments included
    assert added == ['transactions = "data/alice.dat"']
    # ... in the owner's order: the file is the old one with one line inserted
    assert [line for line in text.splitlines() if line not in added] == OWNER_TEXT.splitlines()
    expected = dict(before, data=dict(before["data"], transactions="data/alice.dat"))
    assert tomllib.loads(text) == expected
    assert path.stat().st_mode & 0o777 == 0o600  # still private

    # Pointing the entry at another file changes that one line in place, nothing else.
    other = tmp_path / "elsewhere.dat"
    other.write_text("3\n")
    set_party_data(path, "customers", other)
    gone, added = _diff(text, path.read_text())
    assert gone == ['customers = "data/customers.csv"']
    assert added == ['customers = "elsewhere.dat"']
    assert path.read_text().index("# the marketing extract") < path.read_text().index("customers =")


def test_set_party_data_refuses_missing_files(tmp_path: Path) -> None:
    path = tmp_path / "alice.toml"
    path.write_text(OWNER_TEXT)
    with pytest.raises(ConfigError, match=r"data file not found: .*nowhere\.dat"):
        set_party_data(path, "transactions", tmp_path / "nowhere.dat")
    with pytest.raises(ConfigError, match="settings file not found"):
        set_party_data(tmp_path / "missing.toml", "transactions", path)
    (tmp_path / "bad.toml").write_text("party = \n")
    (tmp_path / "d.dat").write_text("1\n")
    with pytest.raises(ConfigError, match=r"bad\.toml: not valid TOML"):
        set_party_data(tmp_path / "bad.toml", "transactions", tmp_path / "d.dat")
    assert path.read_text() == OWNER_TEXT  # a refused update leaves the file alone


def test_new_settings_files_explain_every_setting(cons_dir: Path) -> None:
    text = (cons_dir / "alice.toml").read_text()
    lines = text.splitlines()
    assert lines[0].startswith("# Private settings of party 'alice'")
    # every key and every table header of a fresh settings file has a comment just above
    # or (for a table) just below it
    for i, line in enumerate(lines):
        if line.startswith("["):
            assert lines[i + 1].startswith("#"), line
        elif "=" in line and not line.startswith("#"):
            assert lines[i - 1].startswith("#"), line
    assert '# transactions = "data/alice.dat"' in text  # how to name a data file
    doc = tomllib.loads(text)
    assert doc["data"] == {} and set(doc["inputs"]) == {"secure_sum"}
    assert load_settings(cons_dir / "alice.toml").name == "alice"
    assert (cons_dir / "alice.toml").stat().st_mode & 0o777 == 0o600
    roster = (cons_dir / "consortium.toml").read_text()
    assert "# The CA every party trusts" in roster


def test_init_overwrite_keeps_the_owners_edits(cons_dir: Path) -> None:
    path = cons_dir / "alice.toml"
    data = cons_dir / "data" / "alice.dat"
    data.parent.mkdir()
    data.write_text("1 2 3\n")
    owner = (
        path.read_text()
        .replace("[node]\n", "[node]\n# owner: keep the ledger on the big disk\n")
        .replace("\n[inputs]", 'state_dir = "state/alice-ledger"  # moved\n\n[inputs]')
        .replace("secure_sum = ", "secure_sum = 999  # the real value\nold_sample = ")
    )
    owner += "\n[limits]  # tuned for our link\nmax_streams_per_peer = 7\n"
    path.write_text(owner)
    set_party_data(path, "transactions", data)
    edited = path.read_text()

    init_consortium(
        cons_dir, PARTIES, base_port=50400, job_timeout_s=30, rng=4, policy_text="", overwrite=True
    )
    text = path.read_text()
    gone, added = _diff(edited, text)
    # only what init sets changed: the listen address and the job timeout
    assert sorted(gone) == ["job_timeout_s = 60.0", 'listen = "127.0.0.1:50300"']
    assert sorted(added) == ["job_timeout_s = 30.0", 'listen = "127.0.0.1:50400"']
    doc = tomllib.loads(text)
    assert doc["inputs"]["secure_sum"] == 999  # the owner's input, not a new sample
    assert doc["data"] == {"transactions": "data/alice.dat"}
    assert doc["limits"] == {"max_streams_per_peer": 7}
    loaded = load_settings(path)  # the new certificate and roster match
    assert loaded.listen == "127.0.0.1:50400" and loaded.limits.max_streams_per_peer == 7
    # a file that is not TOML any more is replaced by a fresh one
    (cons_dir / "bob.toml").write_text("this is [not toml\n")
    init_consortium(cons_dir, PARTIES, base_port=50400, rng=5, policy_text="", overwrite=True)
    assert load_settings(cons_dir / "bob.toml").name == "bob"


_key = st.from_regex(r"[a-z][a-z0-9_]{0,8}", fullmatch=True)
_scalar = (
    st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
)
_value = _scalar | st.lists(st.integers(-100, 100), max_size=4)
_tables = st.dictionaries(_key, st.dictionaries(_key, _scalar, max_size=3), max_size=3)


def _merged(doc: dict, updates: dict, defaults: dict) -> dict:
    """The oracle: plain dictionaries merged the way update_toml documents it."""
    out = {k: dict(v) if isinstance(v, dict) else v for k, v in doc.items()}
    for src, only_missing in ((updates, False), (defaults, True)):
        for k, v in src.items():
            if isinstance(v, dict) and isinstance(out.get(k), dict):
                for kk, vv in v.items():
                    if not (only_missing and kk in out[k]):
                        out[k][kk] = vv
            elif not (only_missing and k in out):
                out[k] = dict(v) if isinstance(v, dict) else v
    return out


@settings(max_examples=60, deadline=None)
@given(
    st.dictionaries(_key, _value, max_size=4),
    _tables,
    st.dictionaries(_key, _value, max_size=3),
    _tables,
    _tables,
    st.text(max_size=30),
)
def test_round_trips_equal_the_parsed_values(
    scalars, tables, new_scalars, new_tables, default_tables, comment
):
    doc = {**scalars, **{k: v for k, v in tables.items() if k not in scalars}}
    comments = {k: comment for k in doc} | {f"[{k}]": comment for k in tables}
    text = write_toml(doc, header="a\nb", comments=comments)
    assert tomllib.loads(text) == doc
    updates = {**new_scalars, **{k: v for k, v in new_tables.items() if k not in new_scalars}}
    # a scalar and a table under one name cannot be merged key by key; keep them apart
    updates = {
        k: v for k, v in updates.items() if isinstance(v, dict) == isinstance(doc.get(k, v), dict)
    }
    defaults = {
        k: v
        for k, v in default_tables.items()
        if isinstance(doc.get(k, {}), dict) and k not in updates
    }
    new = update_toml(text, updates, defaults=defaults)
    assert tomllib.loads(new) == _merged(doc, updates, defaults)
    assert update_toml(new, {}) == new  # an empty update changes no byte


def test_update_toml_file_is_atomic_and_keeps_mode(tmp_path: Path) -> None:
    path = tmp_path / "s.toml"
    path.write_text(OWNER_TEXT)
    os.chmod(path, 0o640)
    inode = path.stat().st_ino
    update_toml_file(path, {"node": {"listen": "0.0.0.0:50051"}})
    assert path.stat().st_mode & 0o777 == 0o640
    assert path.stat().st_ino != inode  # replaced by rename, never truncated in place
    assert [p.name for p in tmp_path.iterdir()] == ["s.toml"]  # no temporary file left
    assert tomllib.loads(path.read_text())["node"]["state_dir"] == "state/alice"
    with pytest.raises(ConfigError, match=r"file not found: .*nope\.toml"):
        update_toml_file(tmp_path / "nope.toml", {"a": 1})


def test_a_new_data_file_is_seen_by_the_next_job_without_restart(
    cons_dir: Path, tmp_path: Path
) -> None:
    settings_path = cons_dir / "alice.toml"
    node_settings = load_settings(settings_path)  # what a node loads at start

    def next_job_context() -> PartyContext:  # what the node builds when a job starts
        return PartyContext(
            name="alice",
            settings=reload_party_tables(node_settings),
            base_dir=node_settings.base_dir,
        )

    with pytest.raises(ConfigError, match="has no data file 'transactions'"):
        read_party_transactions(next_job_context(), "transactions")

    first = cons_dir / "data" / "alice.dat"
    first.parent.mkdir()
    first.write_text("1 2 3\n2 3\n3\n")
    set_party_data(settings_path, "transactions", first)  # what `ppdm partition` does
    db = read_party_transactions(next_job_context(), "transactions")
    assert list(db.transactions()) == list(read_fimi(first).transactions())
    assert db.n_transactions == 3

    # A second partition points the party at another file: the next job reads that one.
    second = tmp_path / "alice-v2.dat"
    second.write_text("7 8\n9\n")
    set_party_data(settings_path, "transactions", second)
    assert read_party_transactions(next_job_context(), "transactions").n_transactions == 2

    # inputs are re-read too; everything else stays as loaded at start
    update_toml_file(settings_path, {"inputs": {"secure_sum": 5}, "node": {"listen": "x:1"}})
    fresh = reload_party_tables(node_settings)
    assert fresh["inputs"] == {"secure_sum": 5}
    assert fresh["node"] == node_settings.raw["node"]
    assert fresh["tls"] == node_settings.raw["tls"]
    assert node_settings.raw.get("data") == {}  # the loaded settings are not mutated


def test_a_missing_data_file_is_named_not_the_settings_file(cons_dir: Path) -> None:
    settings_path = cons_dir / "alice.toml"
    node_settings = load_settings(settings_path)
    data = cons_dir / "alice-extract.dat"
    data.write_text("1 2\n")
    set_party_data(settings_path, "transactions", data)
    data.unlink()  # the owner moved the file away after the partition
    ctx = PartyContext(
        name="alice", settings=reload_party_tables(node_settings), base_dir=node_settings.base_dir
    )
    with pytest.raises(ConfigError) as err:
        read_party_transactions(ctx, "transactions")
    message = str(err.value)
    assert "alice-extract.dat" in message and "not found" in message
    assert "settings" not in message and "alice.toml" not in message


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('data = "x"\n', r"\[data\] must be a table"),
        ("inputs = 3\n", r"\[inputs\] must be a table"),
        ("[data]\ntransactions = 3\n", "data.transactions must be a data file path"),
        ('[data]\ntransactions = ""\n', "data.transactions must be a data file path"),
        ("[data\n", "not valid TOML"),
    ],
)
def test_reload_errors_name_the_settings_file(cons_dir: Path, text: str, message: str) -> None:
    path = cons_dir / "alice.toml"
    node_settings = load_settings(path)
    path.write_text(text)  # only [inputs] and [data] are re-read
    with pytest.raises(ConfigError, match=message) as err:
        reload_party_tables(node_settings)
    assert str(path) in str(err.value)
    path.unlink()
    with pytest.raises(ConfigError, match=r"file not found: .*alice\.toml"):
        reload_party_tables(node_settings)
