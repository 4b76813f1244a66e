"""A kernel calling pure helper functions: out = clamp(lerp(x, y, t), 0, 1)
(the twin of examples/helper.sk)."""

from sarek_py.frontend import Vec, f32, global_thread_id, helper, i32, kernel


@helper(pure=True)
def lerp(a: f32, b: f32, t: f32) -> f32:
    return a + t * (b - a)


@helper(pure=True)
def clamp(v: f32, lo: f32, hi: f32) -> f32:
    if v < lo:
        return lo
    elif v > hi:
        return hi
    else:
        return v


@kernel
def blend(x: Vec[f32], y: Vec[f32], out: Vec[f32], t: f32, n: i32):
    i = global_thread_id()
    if i < n:
        out[i] = clamp(lerp(x[i], y[i], t), 0.0, 1.0)
