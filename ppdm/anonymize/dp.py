"""Deprecated alias: differential privacy moved to :mod:`ppdm.dp` (removed next release)."""

from ppdm import _alias_moved

_alias_moved(__name__, "ppdm.dp")
