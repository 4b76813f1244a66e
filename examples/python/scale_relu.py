"""A producer and an element-wise consumer, the pair epilogue fusion joins
(the twin of examples/scale_relu.sk): scale writes tmp = a * x, relu reads tmp at the
same index and writes y = max(tmp, 0)."""

from sarek_py.frontend import Vec, f32, global_thread_id, i32, kernel


@kernel
def scale(x: Vec[f32], tmp: Vec[f32], a: f32, n: i32):
    i = global_thread_id()
    if i < n:
        tmp[i] = a * x[i]


@kernel
def relu(tmp: Vec[f32], y: Vec[f32], n: i32):
    i = global_thread_id()
    if i < n:
        v = tmp[i]
        y[i] = v if v > 0.0 else 0.0
