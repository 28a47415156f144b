"""``keys`` was split by responsibility (issue 26, item 1): the fixed-base comb and its
threads moved to ``comb``. The names ``keys`` offered still import from it as the very
objects ``comb`` defines, except the thread settings: a copy of ``MASK_THREADS`` in
``keys`` would make a patch of it silently do nothing."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from ppdm.protocols.paillier import comb, keys

PAILLIER = Path(keys.__file__).resolve().parent


@pytest.mark.parametrize(
    "name", ["DEFAULT_COMB_BLOCKS", "DEFAULT_WINDOW", "FixedBaseTable", "threaded_batches"]
)
def test_keys_re_exports_the_comb(name):
    assert getattr(keys, name) is getattr(comb, name)


@pytest.mark.parametrize("name", ["MASK_THREADS", "MASK_THREAD_MIN", "_mask_pool"])
def test_thread_settings_live_in_comb_only(name, monkeypatch):
    assert hasattr(comb, name)
    with pytest.raises(AttributeError):
        monkeypatch.setattr(keys, name, None)


def test_a_patched_thread_count_reaches_the_key_classes(monkeypatch):
    """Patching ``comb.MASK_THREADS`` changes how the keys' batches are split."""
    pub, _ = keys.generate_keypair(512, allow_insecure=True)
    calls: list[int] = []
    real = pub.table._random_powers

    def spy(count: int) -> list[object]:
        calls.append(count)
        return real(count)

    monkeypatch.setattr(pub.table, "_random_powers", spy)
    monkeypatch.setattr(comb, "_mask_pool", None)
    monkeypatch.setattr(comb, "MASK_THREADS", 1)
    pub.random_masks(200)
    assert calls == [200]
    calls.clear()
    monkeypatch.setattr(comb, "MASK_THREADS", 2)
    pub.random_masks(200)
    assert sorted(calls) == [100, 100]


def test_comb_imports_neither_keys_nor_pool():
    names = set()
    for node in ast.walk(ast.parse((PAILLIER / "comb.py").read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
    assert not {n for n in names if n.startswith("ppdm.")}


@pytest.mark.parametrize("module", ["keys.py", "comb.py"])
def test_each_part_stays_under_750_lines(module):
    assert len((PAILLIER / module).read_text(encoding="utf-8").splitlines()) <= 750
