"""The names of the rule-hiding methods (a light module: the command line lists them
without loading the solvers)."""

from __future__ import annotations

#: Every method :func:`ppdm.hiding.api.hide_rules` takes.
METHODS = ("1.a", "1.b", "2.a", "2.b", "2.c", "swa", "remove", "border", "maxmin", "exact")
