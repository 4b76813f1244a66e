"""Passes, IR → IR or a refusal naming its rule: epilogue fusion and its launch-level
legality (:mod:`sarek_py.fusion.epilogue`), the loop passes on host programs — inlining,
producer-consumer fusion, ping-pong (:mod:`sarek_py.fusion.loops`) — the pass registry,
the contraction policy and :class:`~sarek_py.fusion.refusal.FusionRefused`."""

# The launch-condition checker of fused kernels (specs/fusion-legality.md LEG-14) is
# registered with the IR whenever any part of sarek_py is imported.
from sarek_py.fusion.epilogue import conditions as _conditions  # noqa: E402, F401
