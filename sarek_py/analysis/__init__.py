"""Analyses every pass shares: the one effect summary of helpers, procedures and host
statements (:mod:`sarek_py.analysis.effects`, specs/effects.md)."""
