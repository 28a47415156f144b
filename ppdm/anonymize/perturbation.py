"""Deprecated alias: data collection (randomization, randomized response, RA, anatomy)
moved to :mod:`ppdm.perturb` (removed next release)."""

from ppdm import _alias_moved

_alias_moved(__name__, "ppdm.perturb")
