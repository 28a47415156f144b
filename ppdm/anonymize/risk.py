"""Deprecated alias: risk evaluation moved to :mod:`ppdm.risk` (removed next release)."""

from ppdm import _alias_moved

_alias_moved(__name__, "ppdm.risk")
