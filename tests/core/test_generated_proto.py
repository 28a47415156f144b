"""The committed generated code equals what protoc makes from proto/ today."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
GENERATED = REPO / "ppdm" / "proto" / "ppdm" / "v1"

# Lines that only record the generator's version.
_VERSION_LINES = re.compile(
    r"^(# Protobuf Python Version:.*|GRPC_GENERATED_VERSION = .*|\s+\d+,\s*$)$", re.MULTILINE
)


def _normalise(text: str) -> str:
    return _VERSION_LINES.sub("", text)


def test_generated_code_is_up_to_date(tmp_path):
    pytest.importorskip("grpc_tools")
    from ppdm.proto.generate import generate

    written = generate(tmp_path)
    fresh = {p.name: p for p in written}
    committed = {p.name: p for p in GENERATED.glob("*.py*") if p.name != "__init__.py"}
    assert sorted(fresh) == sorted(committed), "generated files differ from committed ones"
    for name, path in fresh.items():
        assert _normalise(path.read_text()) == _normalise(committed[name].read_text()), (
            f"{name} is stale: run `python -m ppdm.proto.generate`"
        )
