"""PolyBench/C 4.2 stencils as host programs (specs/loop-fusion.md LF-50..LF-53)."""
