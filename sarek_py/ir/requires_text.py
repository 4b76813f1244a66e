"""The text form of a fused kernel's launch conditions: the ``requires`` clause of its
header (specs/text-format.md, specs/fusion-legality.md LEG-13), read by the parser and
written by the printer."""

from __future__ import annotations

from typing import Any

from sarek_py.ir.lexer import INT, NAME
from sarek_py.ir.requires import Count, FusionRequires, FusionStep
from sarek_py.ir.types import ArrayType, Scalar


def format_requires(req: FusionRequires) -> str:
    """The ``requires`` clause of a fused kernel's header (TXT, LEG-13)::

        requires fused(scale, relu, p_y, ep_tc) same(p_x, p_w)

    ``fused(P, C, array, count[, tp, tc])`` per step, outermost first; ``same(a, b, …)``
    per group of parameters bound to one buffer."""
    items = []
    for s in req.steps:
        fields = [s.producer, s.consumer, s.array, s.count]
        if s.threads is not None:
            fields += [str(t) for t in s.threads]
        items.append(f"fused({', '.join(fields)})")
    items += [f"same({', '.join(g)})" for g in req.same]
    return "requires " + " ".join(items)


def parse_requires(p: Any, params: tuple[Any, ...]) -> FusionRequires:
    """Read a ``requires`` clause (the word ``requires`` is the next token) with parser
    ``p`` of :mod:`sarek_py.ir.parser`, checking every name against ``params``."""
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

    steps: list[FusionStep] = []
    same: list[tuple[str, ...]] = []
    while p.at(NAME) and p.peek().text in ("fused", "same"):
        word = p.advance()
        p.expect("(", f"after '{word.text}'")
        if word.text == "fused":
            prod = str(p.expect_name("(the producer's name)").text)
            p.expect(",", "after the producer's name")
            cons = str(p.expect_name("(the consumer's name)").text)
            p.expect(",", "after the consumer's name")
            arr = param("array", "(the intermediate array)")
            p.expect(",", "after the intermediate array")
            cnt = param("int", "(the parameter of the consumer's thread count)")
            threads: tuple[Count, Count] | None = None
            if p.accept(","):
                tp = count()
                p.expect(",", "between the two thread counts")
                threads = (tp, count())
            steps.append(FusionStep(prod, cons, arr, cnt, threads))
        else:
            group = [param("array", "(a parameter bound to the same buffer)")]
            while p.accept(","):
                group.append(param("array", "(a parameter bound to the same buffer)"))
            if len(group) < 2 or len(set(group)) != len(group):
                raise p.error("same(...) needs two or more different array parameters", word)
            same.append(tuple(group))
        p.expect(")", f"to close '{word.text}('")
    if not steps:
        raise p.unexpected("'fused(producer, consumer, array, count)' after 'requires'")
    seen = [n for g in same for n in g]
    if len(seen) != len(set(seen)):
        raise p.error("an array parameter is in two same(...) groups")
    return FusionRequires(tuple(steps), tuple(same))


__all__ = ["format_requires", "parse_requires"]
