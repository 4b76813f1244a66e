"""Corpus kernels written with the Python front end (docs/tutorial.md), the way a CUDA
programmer writes them: the same sources, idioms and changes as the .sk files of the same
names (vectorAdd.sk, biasRelu.sk, gelu_forward.sk, residual_forward.sk, whose headers name
the sources); tests/test_corpus.py checks each prints as the .sk kernel."""

from __future__ import annotations

from sarek_py.frontend import (
    Vec,
    block_dim_x,
    block_idx_x,
    f32,
    i32,
    kernel,
    sqrt,
    tanh,
    thread_idx_x,
)


@kernel
def vectorAdd(A: Vec[f32], B: Vec[f32], C: Vec[f32], numElements: i32):  # noqa: N802, N803
    i = block_dim_x() * block_idx_x() + thread_idx_x()
    if i < numElements:
        C[i] = A[i] + B[i] + 0.0


@kernel
def biasRelu(C: Vec[f32], bias: f32, D: Vec[f32], numElements: i32):  # noqa: N802, N803
    i = block_dim_x() * block_idx_x() + thread_idx_x()
    if i < numElements:
        v = C[i] + bias
        D[i] = v if v > 0.0 else 0.0


@kernel
def gelu_forward_kernel1(out: Vec[f32], inp: Vec[f32], N: i32):  # noqa: N803
    i = block_idx_x() * block_dim_x() + thread_idx_x()
    if i < N:
        xi = inp[i]
        cube = 0.044715 * xi * xi * xi
        out[i] = 0.5 * xi * (1.0 + tanh(sqrt(f32(2.0 / 3.141592653589793)) * (xi + cube)))


@kernel
def residual_forward_kernel1(out: Vec[f32], inp1: Vec[f32], inp2: Vec[f32], N: i32):  # noqa: N803
    idx = block_idx_x() * block_dim_x() + thread_idx_x()
    if idx < N:
        out[idx] = inp1[idx] + inp2[idx]
