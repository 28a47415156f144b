"""Deprecated alias: the test beds moved to :mod:`ppdm.testbed` (removed next release)."""

from ppdm import _alias_moved

_alias_moved(__name__, "ppdm.testbed.consortia")
