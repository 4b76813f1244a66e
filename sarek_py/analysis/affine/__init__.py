"""Affine analysis: forms, conditions, Fourier-Motzkin, access paths, wrap-around (specs/affine.md)."""
