"""Kernel fusion: epilogue fusion, legality, affine analysis, inlining, loop fusion, passes."""
