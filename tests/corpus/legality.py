"""Whether each corpus pair may be fused, by hand analysis of the originals -- the ground
truth the decisions are held to: an illegal pair must never fuse (tests/test_corpus.py), a
legal one should (issue 13's acceptance: "every legal pair fuses").

Epilogue fusion runs the consumer's body in the producer's thread after its stores, so a
pair is legal when every element the consumer thread reads from the producer's outputs was
written by the same thread (or by no thread), and the launches start the same threads."""

from __future__ import annotations

#: (producer, consumer) -> (legal, why)
LEGALITY: dict[tuple[str, str], tuple[bool, str]] = {
    ("vectorAdd", "biasRelu"): (
        True, "same index expression, guard and rounded-up launch; thread i reads C[i], "
              "which thread i wrote"),
    ("MatrixMulCUDA", "add_bias"): (
        False, "the 2-D producer's thread writes C[row * wB + col], the 1-D consumer's "
               "thread t reads out[t]: another thread's element"),
    ("add_bias", "biasRelu"): (
        True, "the grid-stride loop runs once per thread (the launch has at least OC*B*T "
              "threads), so thread t writes out[t] and the consumer's thread t reads it"),
    ("matmul_forward_kernel1", "add_bias"): (
        False, "the 2-D producer's thread (bt, oc) writes out[bt * OC + oc]; the consumer's "
               "thread t reads out[t]: another thread's element"),
    ("add_bias", "gelu_forward_kernel1"): (
        True, "the grid-stride loop runs once per thread (at least B*T*OC threads); gelu's "
              "thread i reads out[i], which thread i wrote (the blocks differ, 256 and "
              "128, but both indices are the global thread id)"),
    ("gelu_forward_kernel1", "residual_forward_kernel1"): (
        True, "element-wise: thread i reads G[i], which thread i wrote (same guard)"),
    ("residual_forward_kernel1", "softmax_forward_kernel1"): (
        False, "softmax's thread i reads the whole row i*C .. i*C+C-1, written by C "
               "other threads"),
    ("residual_forward_kernel1", "layernorm_forward_kernel1"): (
        False, "layernorm's thread idx reads the whole row idx*C .. idx*C+C-1, written by C "
               "other threads"),
    ("convolution2D_kernel", "threshold2D"): (
        True, "same 2-D index and launch; thread (i, j) reads B[i*nj+j], which it wrote in "
              "the interior and no thread wrote on the border"),
    ("fdtd_step1_kernel", "fdtd_step2_kernel"): (
        True, "step2 reads hz and ex, which step1 does not write (step1 writes ey only)"),
    ("fdtd_step2_kernel", "fdtd_step3_kernel"): (
        False, "step3's thread (i, j) reads ex[i*ny + j+1], written by thread (i, j+1)"),
    ("srad", "srad2"): (
        False, "srad2 reads d_c at its south and east neighbours (d_iS[row], d_jE[col]), "
               "written by other threads"),
    ("calculate_temp", "calculate_temp"): (
        False, "the second launch's block reads a pyramid of temp around its tile, written "
               "by other blocks of the first launch"),
    ("mean_kernel", "reduce_kernel"): (
        False, "reduce's thread (i, j) reads mean[j], written by mean_kernel's thread j"),
    ("reduce_kernel", "covar_kernel"): (
        False, "covar's thread j1 reads whole columns of data, written by other threads"),
    ("mm2_kernel1", "mm2_kernel2"): (
        False, "mm2_kernel2's thread (i, j) reads the row tmp[i, 0..nj-1], written by nj "
               "other threads"),
    ("stage1", "stage2"): (
        True, "one block: thread x writes a[x], stage2's thread x reads a[x]"),
    ("stage2", "stage3"): (
        True, "one block: thread x writes b[x], stage3's thread x reads b[x]"),
    ("runJacobiCUDA_kernel1", "runJacobiCUDA_kernel2"): (
        False, "kernel2's thread (i, j) writes A[i*n + j], which kernel1's threads (i, j-1), "
               "(i, j+1), (i-1, j), (i+1, j) read: fused, a thread's write may land before "
               "its neighbour's read (B[i*n + j] alone would be thread-wise)"),
    ("runJacobiCUDA_kernel2", "runJacobiCUDA_kernel1"): (
        False, "the next step's kernel1 thread (i, j) reads A at (i, j-1), (i, j+1), "
               "(i+1, j), (i-1, j), written by kernel2's neighbouring threads"),
    ("residual_forward_kernel1", "softmax_forward_kernel2"): (
        False, "softmax's block idx reads the whole row idx*C .. idx*C+C-1, written by C "
               "threads of other blocks of residual (and its threads exchange partial "
               "results through shared memory and barriers)"),
    ("residual_forward_kernel1", "softmax_forward_online_kernel1"): (
        False, "softmax's thread i reads the whole row i*C .. i*C+C-1, written by C "
               "other threads"),
    ("residual_forward_kernel1", "mean_kernel"): (
        False, "mean_kernel's block idx reads the whole row idx*C .. idx*C+C-1, written by "
               "C threads of residual (in other blocks)"),
    ("mean_kernel", "rstd_kernel"): (
        False, "rstd_kernel's every thread of block idx reads mean[idx], which mean_kernel's "
               "thread 0 of block idx wrote (after a shared-memory reduction of the row)"),
    ("rstd_kernel", "normalization_kernel"): (
        False, "normalization's thread idx reads mean[idx / C] and rstd[idx / C], written by "
               "thread 0 of block idx / C of the reductions (another thread, other launch "
               "shape)"),
    ("srad_cuda_1", "srad_cuda_2"): (
        False, "srad_cuda_2's thread (ty, tx) reads C_cuda at its south and east "
               "neighbours (through the shared tiles south_c/east_c and c_cuda_temp), written "
               "by other threads of srad_cuda_1, some in other blocks"),
    ("convolution3D_kernel", "convolution3D_kernel"): (
        True, "consecutive planes i = 1 then i = 2: both launches read only A and write "
              "B, plane i of thread (j, k) each -- different elements, no element of B "
              "read: nothing flows between them and no two threads touch one element"),
}
