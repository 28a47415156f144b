"""A node checks the form of its [data] sources when it starts (issue 17): a bad entry
stops ``ppdm party serve`` with one line naming the entry, never the secret."""

from __future__ import annotations

import pytest

from ppdm.errors import ConfigError
from ppdm.parties.consortium import init_consortium, load_settings
from ppdm.service.node import PartyNode


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ('{ kind = "sql", url = "postgresql://u:hunter2@h/db", table = "t" }', "password"),
        ('{ kind = "sql", url = "postgresql://u@h/db" }', "query"),
        ('{ kind = "warehouse", path = "x" }', "kind"),
    ],
)
def test_bad_data_entries_stop_the_node_at_start(tmp_path, entry, message):
    init_consortium(tmp_path, ["alice", "bob"], ports=[50997, 50998])
    path = tmp_path / "alice.toml"
    text = path.read_text()
    assert "[data]" in text
    path.write_text(text.replace("[data]", f"[data]\ntx = {entry}", 1))
    node = PartyNode(load_settings(path))
    with pytest.raises(ConfigError, match=message) as info:
        node.start()
    assert "hunter2" not in str(info.value)
    assert "[data] tx" in str(info.value)
    node.ledger.close()
