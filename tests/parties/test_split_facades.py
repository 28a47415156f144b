"""``consortium`` and ``grpc_net`` were split by responsibility (issue 26, item 1); every
name importers used still imports from them, as the very object of the module that now
defines it, and the parts stay small and never import their front door back."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

PARTIES = Path(__file__).resolve().parents[2] / "ppdm" / "parties"

# Every name other code imported from the old modules (their ``__all__``, and the
# private helpers ``roster.py`` and the tests use), with the module that defines it now.
MOVED = {
    "ppdm.parties.consortium": {
        "ppdm.parties.certificates": [
            "_key_pem",
            "_pem",
            "certificate_fingerprint",
            "certificate_names",
            "generate_ca",
            "issue_certificate",
        ],
        "ppdm.parties.tomlfiles": [
            "_write_private",
            "update_toml",
            "update_toml_file",
            "write_toml",
        ],
        "ppdm.parties.consortium_file": [
            "_NAME_RE",
            "DEFAULT_MAX_ENVELOPE_BYTES",
            "DEFAULT_MAX_MESSAGE_BYTES",
            "MIN_MESSAGE_BYTES",
            "Consortium",
            "PartyEntry",
            "_check_address",
            "load_consortium",
            "loads_consortium",
            "roster_payload",
            "sign_payload",
        ],
        "ppdm.parties.settings_file": [
            "DEFAULT_JOB_TIMEOUT_S",
            "DEFAULT_MAX_WORKERS",
            "NodeLimits",
            "PartySettings",
            "load_settings",
            "reload_party_tables",
        ],
        "ppdm.parties.provisioning": ["init_consortium", "write_party_files"],
    },
    "ppdm.parties.grpc_net": {
        "ppdm.parties.channels": [
            "CONNECT_TIMEOUT_MS",
            "RECONNECT_BACKOFF_MS",
            "authenticate",
            "channel_options",
            "dynamic_server_credentials",
            "open_channel",
            "peer_certificate",
            "server_credentials",
        ],
        "ppdm.parties.framing": [
            "FRAME_OVERHEAD",
            "PREFERRED_FRAME_BYTES",
            "FrameView",
            "FramingError",
            "Reassembler",
            "encode_frames",
            "frame_bytes",
            "parse_frame",
            "split_envelope",
        ],
        "ppdm.parties.exchange": [
            "OVER_BUDGET_REASON",
            "PENDING_JOB_WAIT_S",
            "JobLookup",
            "ReassemblyBudget",
            "StreamWatch",
            "handle_exchange",
        ],
        "ppdm.parties.grpc_net": ["JobLinks", "PeerStream"],
    },
}

CASES = [
    (facade, home, name)
    for facade, homes in MOVED.items()
    for home, names in homes.items()
    for name in names
]


@pytest.mark.parametrize(("facade", "home", "name"), CASES)
def test_every_old_name_is_the_object_its_new_module_defines(facade, home, name):
    assert getattr(importlib.import_module(facade), name) is getattr(
        importlib.import_module(home), name
    )


@pytest.mark.parametrize("facade", sorted(MOVED))
def test_the_old_public_names_are_all_still_listed(facade):
    module = importlib.import_module(facade)
    public = {n for homes in MOVED[facade].values() for n in homes if not n.startswith("_")}
    # ``__all__`` lists what it listed before the split, and each of those names resolves.
    assert set(module.__all__) <= public
    for name in module.__all__:
        assert hasattr(module, name)


def _ppdm_imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    return found


@pytest.mark.parametrize(
    ("facade", "home"),
    [(f, h) for f, homes in MOVED.items() for h in homes if h != f],
)
def test_the_parts_never_import_their_front_door(facade, home):
    path = PARTIES / f"{home.rsplit('.', 1)[1]}.py"
    assert facade not in _ppdm_imports(path)


@pytest.mark.parametrize(
    "module", sorted({m for homes in MOVED.values() for m in homes} | set(MOVED))
)
def test_each_part_stays_under_750_lines(module):
    path = PARTIES / f"{module.rsplit('.', 1)[1]}.py"
    assert len(path.read_text(encoding="utf-8").splitlines()) <= 750
