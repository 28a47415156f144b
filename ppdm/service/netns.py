"""Deprecated alias: WAN emulation moved to :mod:`ppdm.testbed.netns` (removed next release)."""

from ppdm import _alias_moved

_alias_moved(__name__, "ppdm.testbed.netns")
