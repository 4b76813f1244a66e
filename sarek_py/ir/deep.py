"""Deeply nested programs: one bound on nesting, and a stack deep enough for it
(specs/text-format.md TXT-32).

The parser, the checker, the passes, the printers, the code generators and the
interpreter are recursive over the IR tree. Python's default recursion limit (1000
frames) and an 8 MiB thread stack would stop them near 60 nested parentheses or a few
hundred chained operators, with a ``RecursionError`` that names no place in the source.
Instead:

- a program may nest up to :data:`MAX_DEPTH` levels (IR tree depth: each operator,
  statement, ``let`` or ``if`` is a level) and :data:`MAX_NESTING` levels of source
  brackets; past either bound the parsers report a located error
  (:func:`check_depth`, :class:`NestingGuard`);
- work on a program runs on a thread with a large stack and a raised recursion limit
  (:func:`call_deep`), so every recursive stage handles a program of the maximal depth.
  The CLI runs each subcommand this way; library entry points that may meet a deep tree
  (parsing, checking, the front end, the interpreter) do too (:func:`deep`).
"""

from __future__ import annotations

import functools
import sys
import threading
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

import attrs

from sarek_py.ir.nodes import Loc

#: the deepest IR tree a program may have (levels of nested operators and statements)
MAX_DEPTH = 1000
#: the most nested brackets / unary operators the parsers read
MAX_NESTING = 5000
#: below this IR depth a tree is processed on the caller's own stack
SHALLOW = 100

#: the stack of a deep-recursion thread, and its recursion limit
STACK_BYTES = 1 << 30
RECURSION_LIMIT = 400_000

P = ParamSpec("P")
R = TypeVar("R")

_state = threading.local()
_limit_lock = threading.Lock()


def in_deep_thread() -> bool:
    """Whether the current thread is a deep-recursion thread."""
    return bool(getattr(_state, "deep", False))


def call_deep(fn: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
    """``fn(*args, **kwargs)`` on a thread with a :data:`STACK_BYTES` stack and a
    recursion limit of :data:`RECURSION_LIMIT`; its result, or its exception re-raised
    here. Called from such a thread, it calls ``fn`` directly."""
    if in_deep_thread():
        return fn(*args, **kwargs)
    box: dict[str, Any] = {}

    def work() -> None:
        _state.deep = True
        try:
            box["result"] = fn(*args, **kwargs)
        except BaseException as exc:  # re-raised in the caller's thread
            box["error"] = exc

    with _limit_lock:
        old_stack = threading.stack_size()
        threading.stack_size(STACK_BYTES)
        try:
            t = threading.Thread(target=work, name="sarek-deep", daemon=True)
        finally:
            threading.stack_size(old_stack)
        old_limit = sys.getrecursionlimit()
        sys.setrecursionlimit(max(old_limit, RECURSION_LIMIT))
    try:
        t.start()
        t.join()
    finally:
        with _limit_lock:
            if not t.is_alive():
                sys.setrecursionlimit(old_limit)
    if "error" in box:
        err: BaseException = box["error"]
        raise err.with_traceback(err.__traceback__)
    result: R = box["result"]
    return result


def deep(fn: Callable[P, R]) -> Callable[P, R]:
    """Decorate a library entry point: run it through :func:`call_deep` when one of its
    arguments is an IR tree deeper than :data:`SHALLOW` (on the caller's stack
    otherwise, which costs nothing)."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        if not in_deep_thread() and any(
                tree_depth(a) > SHALLOW for a in (*args, *kwargs.values())
                if attrs.has(type(a))):
            return call_deep(fn, *args, **kwargs)
        return fn(*args, **kwargs)

    return wrapper


def _children(x: object) -> list[object]:
    out: list[object] = []
    for f in attrs.fields(type(x)):  # type: ignore[arg-type]  # x is an attrs instance
        v = getattr(x, f.name)
        if isinstance(v, tuple):
            out.extend(c for c in v if attrs.has(type(c)))
        elif attrs.has(type(v)) and not isinstance(v, Loc):
            out.append(v)
    return out


def deepest(node: object, limit: int | None = None) -> tuple[int, object]:
    """The depth of the attrs tree ``node`` (1 for a leaf; types and variables count as
    nodes) and its deepest node, walked without recursion. With ``limit``, the walk
    stops at the first node deeper than ``limit``."""
    best, best_node = 0, node
    stack: list[tuple[object, int]] = [(node, 1)]
    seen: dict[int, int] = {}
    while stack:
        x, d = stack.pop()
        if d > best:
            best, best_node = d, x
            if limit is not None and d > limit:
                break
        if not attrs.has(type(x)) or seen.get(id(x), 0) >= d:
            continue
        seen[id(x)] = d
        stack.extend((c, d + 1) for c in _children(x))
    return best, best_node


def tree_depth(node: object) -> int:
    """The depth of the attrs tree ``node`` (see :func:`deepest`)."""
    return deepest(node, SHALLOW * 100)[0]


def too_deep(node: object) -> tuple[int, Loc | None] | None:
    """``None`` when ``node`` nests at most :data:`MAX_DEPTH` levels; else the depth
    reached and the location of the deepest located node on the way there."""
    depth, at = deepest(node, MAX_DEPTH)
    if depth <= MAX_DEPTH:
        return None
    return depth, _loc_near(node, at)


def _loc_near(root: object, target: object) -> Loc | None:
    """The location of ``target``, or of its nearest located ancestor in ``root``."""
    parent: dict[int, object] = {}
    stack = [root]
    found = False
    while stack:
        x = stack.pop()
        if x is target:
            found = True
            break
        if attrs.has(type(x)):
            for c in _children(x):
                if id(c) not in parent:
                    parent[id(c)] = x
                    stack.append(c)
    node: object | None = target if found else None
    while node is not None:
        loc = getattr(node, "loc", None)
        if isinstance(loc, Loc):
            return loc
        node = parent.get(id(node))
    return None


def depth_message(what: str) -> str:
    """The error text of a program nested past :data:`MAX_DEPTH`."""
    return (f"{what} is nested more than {MAX_DEPTH} levels deep (operators, statements, "
            "'let's and 'if's all count); split it into helpers or shorter expressions")


class NestingGuard:
    """Counts the brackets and prefix operators a recursive-descent parser is inside;
    :meth:`enter` returns False past :data:`MAX_NESTING` (the parser then reports a
    located error)."""

    def __init__(self) -> None:
        self.level = 0

    def enter(self) -> bool:
        self.level += 1
        return self.level <= MAX_NESTING

    def leave(self) -> None:
        self.level -= 1
