"""One Jacobi step of the 5-point stencil on an h x w grid (the twin of
examples/stencil2d.sk): dst is the average of a point and its four neighbours inside,
src copied on the border. Thread g handles row g // w, column g % w (C division: g >= 0)."""

from sarek_py.frontend import Vec2, f32, global_thread_id, i32, kernel


@kernel
def stencil5(src: Vec2[f32], dst: Vec2[f32], h: i32, w: i32):
    g = global_thread_id()
    if g < h * w:
        y = g // w
        x = g % w
        if y > 0 and y < h - 1 and x > 0 and x < w - 1:
            dst[y, x] = 0.2 * (src[y, x] + src[y - 1, x] + src[y + 1, x] + src[y, x - 1]
                               + src[y, x + 1])
        else:
            dst[y, x] = src[y, x]
