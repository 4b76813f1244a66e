"""Sum of x per block by a tree reduction in shared memory (the twin of
examples/block_reduce.sk). B, the block size, is a power of two, at most 256; elements at
n and past it count as zero. A barrier after each level separates the writes of one level
from the reads of the next."""

from sarek_py.frontend import (
    Vec,
    barrier,
    block_dim_x,
    block_idx_x,
    f32,
    global_thread_id,
    i32,
    kernel,
    shared,
    thread_idx_x,
)


@kernel
def block_sum(x: Vec[f32], out: Vec[f32], n: i32):
    tile = shared(f32, 256)
    stride: i32
    tid = thread_idx_x()
    i = global_thread_id()
    tile[tid] = x[i] if i < n else 0.0
    barrier()
    stride = block_dim_x() // 2
    while stride > 0:
        if tid < stride:
            tile[tid] = tile[tid] + tile[tid + stride]
        barrier()
        stride = stride // 2
    if tid == 0:
        out[block_idx_x()] = tile[0]
