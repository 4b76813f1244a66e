"""The lossless S-expression dump of host programs (specs/text-format.md, TXT-26).

The generic dump of :mod:`sarek_py.ir.sexp` writes any ``attrs`` node whose class it
knows; this module registers the host-program classes (declarations, host statements,
procedures, the program, and the launch node of :mod:`sarek_py.ir.host.launch`) and the
host enums (attributes, intents), so that a program, fused, renamed, ping-ponged or
offloaded, dumps and reads back to an equal tree, ids included.
"""

from __future__ import annotations

from sarek_py.ir.diagnostics import ParseError
from sarek_py.ir.host import program as hp
from sarek_py.ir.host.launch import Launch, ScratchBuffer, Sync
from sarek_py.ir.nodes import Loc
from sarek_py.ir.sexp import from_sexp, register, to_sexp

HOST_CLASSES: tuple[type, ...] = (
    hp.Decl, hp.HAssign, hp.HStore, hp.Block, hp.HIf, hp.HFor, hp.HWhile,
    hp.Break, hp.Continue,
    hp.HReturn, hp.HStop, hp.LoopIndex, hp.ParFor, hp.CallProc, hp.Output, hp.Input,
    hp.Bound, hp.Allocate, hp.Deallocate, hp.PointerAssoc, hp.Param, hp.Procedure,
    hp.Program, Launch, ScratchBuffer, Sync,
)

register(HOST_CLASSES, (hp.Attr, hp.Intent))


def program_to_sexp(program: hp.Program) -> str:
    """The S-expression dump of ``program`` (TXT-24's notation, TXT-26)."""
    return to_sexp(program)


def program_from_sexp(text: str, filename: str = "<sexp>") -> hp.Program:
    """The program a :func:`program_to_sexp` dump describes; a located ``ParseError``
    when the text is not one."""
    node = from_sexp(text, filename)
    if not isinstance(node, hp.Program):
        raise ParseError(f"expected a (Program …) dump, found {type(node).__name__}",
                         Loc(filename, 1, 1), text)
    return node


__all__ = ["HOST_CLASSES", "program_from_sexp", "program_to_sexp"]
