"""``@kernel`` functions for tests/test_adversarial_epilogue_lets.py (the front end reads
their source, so they live in a file)."""

from sarek_py.frontend import Vec, f32, global_thread_id, i32, i64, kernel


@kernel
def scale(x: Vec[f32], tmp: Vec[f32], a: f32, n: i32):
    i = global_thread_id()
    if i < n:
        tmp[i] = a * x[i]


@kernel
def relu_copy(tmp: Vec[f32], y: Vec[f32], n: i32):
    i = global_thread_id()
    t = i
    u = i64(t)
    if t < n:
        v = tmp[t]
        y[u] = v if v > 0.0 else 0.0


@kernel
def relu_reassigned(tmp: Vec[f32], y: Vec[f32], n: i32):
    i = global_thread_id()
    t = i
    if t < n:
        y[t] = tmp[t]
    t = t + 0
    if t < n:
        y[t] = y[t] * 2.0


@kernel
def loop_over_copy(tmp: Vec[f32], y: Vec[f32], n: i32):
    i = global_thread_id()
    t = i
    for t in range(3):
        y[t] = 1.0
    y[t] = tmp[i]
