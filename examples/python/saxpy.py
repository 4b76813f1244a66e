"""y <- a*x + y, one element per thread (the twin of examples/saxpy.sk)."""

from sarek_py.frontend import Vec, f32, global_thread_id, i32, kernel


@kernel
def saxpy(x: Vec[f32], y: Vec[f32], a: f32, n: i32):
    i = global_thread_id()
    if i < n:
        y[i] = a * x[i] + y[i]
