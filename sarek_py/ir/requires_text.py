"""The text form of a kernel's launch conditions: the ``requires`` clause of its header
(specs/text-format.md TXT-35, specs/fusion-legality.md LEG-13, specs/launch.md LCH-25),
read by the parser and written by the printer."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from sarek_py.ir.lexer import INT, NAME
from sarek_py.ir.nodes import Expr
from sarek_py.ir.requires import Count, FusionRequires, FusionStep, Step, ThreadStep
from sarek_py.ir.types import ArrayType, Scalar


def format_requires(req: FusionRequires | None, ranges: Sequence[str] = ()) -> str:
    """The ``requires`` clause of a kernel's header (TXT-35, LEG-13, LCH-25)::

        requires fused(scale, relu, p_y, ep_tc) same(p_x, p_w)
        requires range(lo_1 >= -2147483647, hi_1 <= 2147483645)

    ``fused(P, C, array, count[, tp, tc])`` per epilogue step, ``block(B)`` the block
    size its launches must have and ``within(ep_tc)`` the counts at most ``B`` (EF-23), ``threadwise(P, C)`` per
    thread-wise one (LEG-30), outermost first; ``same(a, b, …)``
    per group of parameters bound to one buffer; ``range(c, …)`` the conditions over the
    scalar arguments (``ranges``: their printed text), when there are any."""
    items = []
    for s in req.steps if req is not None else ():
        if isinstance(s, ThreadStep):
            items.append(f"threadwise({s.producer}, {s.consumer}, {s.dims})")
            continue
        own = f" as {s.prefix}ep_tc" if s.prefix is not None else ""  # FE-97's merged count
        fields = [s.producer, s.consumer, ("dead " if s.dead else "") + s.array, s.count + own]
        if s.threads is not None:
            fields += [str(t) for t in s.threads]
        items.append(f"fused({', '.join(fields)})")
    items += [f"same({', '.join(g)})" for g in req.same] if req is not None else []
    if req is not None and req.block is not None:
        items.append(f"block({req.block})")
    if req is not None and req.within:
        items.append(f"within({', '.join(req.within)})")
    if ranges:
        items.append(f"range({', '.join(ranges)})")
    return "requires " + " ".join(items)


def parse_requires(p: Any, params: tuple[Any, ...], condition: Callable[[], Expr]
                   ) -> tuple[FusionRequires | None, tuple[Expr, ...]]:
    """Read a ``requires`` clause (the word ``requires`` is the next token) with parser
    ``p`` of :mod:`sarek_py.ir.parser`, checking every name against ``params``: the
    fused kernel's conditions (``None`` when it names no ``fused`` step) and the
    conditions over the scalar arguments (``range(...)``, LCH-25), each read by
    ``condition()`` (the parser's, which checks it)."""
    by_name = {v.name: v for v in params}
    p.advance()

    def param(kind: str, context: str) -> str:
        tok = p.expect_name(context)
        v = by_name.get(tok.text)
        ok = v is not None and (isinstance(v.type, ArrayType) if kind == "array"
                                else v.type in (Scalar.I32, Scalar.I64))
        if not ok:
            what = "an array parameter" if kind == "array" else "an integer scalar parameter"
            raise p.error(f"'{tok.text}' is not {what} of this kernel", tok)
        return str(tok.text)

    def count() -> Count:
        if p.at(INT):
            return int(p.advance().value)
        return param("int", "(a thread count: a number or an integer parameter)")

    steps: list[Step] = []
    same: list[tuple[str, ...]] = []
    ranges: list[Expr] = []
    same_word = None
    block: int | None = None
    within: list[str] = []
    while p.at(NAME) and p.peek().text in ("fused", "threadwise", "same", "range", "block",
                                           "within"):
        word = p.advance()
        p.expect("(", f"after '{word.text}'")
        if word.text == "range":
            ranges.append(condition())
            while p.accept(","):
                ranges.append(condition())
        elif word.text == "block":
            tok = p.peek()
            if not p.at(INT) or not 1 <= int(tok.value) <= 2**31 - 1 or block is not None:
                raise p.error("block(...) holds one block size, 1 .. 2147483647", tok)
            block = int(p.advance().value)
        elif word.text == "within":
            within.append(param("int", "(a consumer's thread count within the block)"))
            while p.accept(","):
                within.append(param("int", "(a consumer's thread count within the block)"))
        elif word.text == "threadwise":
            prod = str(p.expect_name("(the producer's name)").text)
            p.expect(",", "after the producer's name")
            cons = str(p.expect_name("(the consumer's name)").text)
            p.expect(",", "after the consumer's name")
            tok = p.peek()
            if not p.at(INT) or not 1 <= int(tok.value) <= 3:
                raise p.error("threadwise(...) ends with the launch dimensions, 1 to 3", tok)
            steps.append(ThreadStep(prod, cons, int(p.advance().value)))
        elif word.text == "fused":
            prod = str(p.expect_name("(the producer's name)").text)
            p.expect(",", "after the producer's name")
            cons = str(p.expect_name("(the consumer's name)").text)
            p.expect(",", "after the consumer's name")
            dead = p.at(NAME) and p.peek().text == "dead" and p.peek(1).kind == NAME
            if dead:  # the intermediate's stores were dropped (EF-33): not a parameter
                p.advance()
                tok = p.expect_name("(the dropped intermediate array)")
                if tok.text in by_name:
                    raise p.error(f"'dead {tok.text}' names a parameter of this kernel: a "
                                  "dropped intermediate is not one", tok)
                arr = str(tok.text)
            else:
                arr = param("array", "(the intermediate array)")
            p.expect(",", "after the intermediate array")
            cnt = param("int", "(the parameter of the consumer's thread count)")
            prefix = None
            if p.at(NAME) and p.peek().text == "as":  # a count merged with another (FE-97)
                p.advance()
                tok = p.expect_name("(the step's own name ending in ep_tc)")
                if not tok.text.endswith("ep_tc"):
                    raise p.error(f"'{tok.text}' after 'as' must end in ep_tc (the name of "
                                  "the step's own thread count)", tok)
                prefix = str(tok.text)[: -len("ep_tc")]
            threads: tuple[Count, Count] | None = None
            if p.accept(","):
                tp = count()
                p.expect(",", "between the two thread counts")
                threads = (tp, count())
            steps.append(FusionStep(prod, cons, arr, cnt, threads, dead=dead,
                                    prefix=prefix))
        else:
            same_word = same_word or word
            group = [param("array", "(a parameter bound to the same buffer)")]
            while p.accept(","):
                group.append(param("array", "(a parameter bound to the same buffer)"))
            if len(group) < 2 or len(set(group)) != len(group):
                raise p.error("same(...) needs two or more different array parameters", word)
            same.append(tuple(group))
        p.expect(")", f"to close '{word.text}('")
    if not steps and not ranges:
        raise p.unexpected("'fused(producer, consumer, array, count)' or 'range(condition, "
                           "…)' after 'requires'")
    if not steps and same_word is not None:
        raise p.error("same(...) belongs to a fused kernel: it needs a fused(...) step",
                      same_word)
    seen = [n for g in same for n in g]
    if len(seen) != len(set(seen)):
        raise p.error("an array parameter is in two same(...) groups")
    if (block is not None or within) and not steps:
        raise p.error("block(...) and within(...) belong to a fused kernel: they need a "
                      "fused(...) step", same_word or p.peek())
    if within and block is None:
        raise p.error("within(...) needs the block(...) its counts are within", p.peek())
    fused = FusionRequires(tuple(steps), tuple(same), block, tuple(within)) if steps else None
    return fused, tuple(ranges)


__all__ = ["format_requires", "parse_requires"]
