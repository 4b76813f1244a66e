"""Analyses every pass shares; they answer questions and change nothing: the host half of
the one effect summary (:mod:`sarek_py.analysis.effects`, over the kernel half
:mod:`sarek_py.ir.effects`, specs/effects.md), the affine analysis
(:mod:`sarek_py.analysis.affine`, specs/affine.md) and integer ranges
(:mod:`sarek_py.analysis.ranges`, asked by the emitter)."""
