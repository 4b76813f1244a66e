"""Kernel fusion: epilogue fusion, legality, affine analysis, inlining, loop fusion, passes."""

# The launch-condition checker of fused kernels (specs/fusion-legality.md LEG-14) is
# registered with the IR whenever any part of sarek_py is imported.
from sarek_py.fusion.epilogue import conditions as _conditions  # noqa: E402, F401
