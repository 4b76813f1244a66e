"""Why a fusion did not happen: a refusal that names its rule (specs/epilogue-fusion.md).

A fusion pass either returns a kernel with the same meaning or raises one of these,
never a half-rewritten program (DESIGN.md, invariant 2).

A refusal may name an option of the API (``p_array=``, ``shared=``, ``force=``). The
command line spells them as flags (``--array``, ``--shared``, ``--force``): the message
records where it names an option (``options``), and :func:`with_flags` rewrites it in
the flags' spelling (EF-16), so a user is told what to type where they are.
"""

from __future__ import annotations

from collections.abc import Mapping

from sarek_py.ir.diagnostics import SarekError
from sarek_py.ir.nodes import Loc

Options = Mapping[str, tuple[str, str]]
"""Where a message names an option: its text there → (the option, the value given)."""


class FusionRefused(SarekError):
    """A fusion that would not be exact (or cannot be proved exact).

    ``rule`` is the id of the rule that refuses (``"EF-3"``, ``"LEG-4"`` …); the message
    names the offending array or construct. ``str()`` starts with the rule id.
    ``options`` maps each piece of the message that names an API option (as the API
    spells it, e.g. ``"p_array=NAME"``) to the option and the value shown.
    """

    kind = "fusion refused"

    def __init__(self, rule: str, message: str, loc: Loc | None = None, *,
                 options: Options | None = None):
        super().__init__(f"[{rule}] {message}", loc)
        self.rule = rule
        self.reason = message
        self.options: Options = dict(options or {})


class Incompatible(FusionRefused):
    """Declarations of the producer and the consumer that cannot be merged (EF-11)."""


def with_flags(r: FusionRefused, flags: Mapping[str, str]) -> FusionRefused:
    """``r`` with each option it names spelled as the command-line flag ``flags`` gives
    for it (``{"p_array": "--array"}``): ``p_array=NAME`` becomes ``--array NAME``."""
    message = r.reason
    for text, (opt, value) in r.options.items():
        if opt in flags:
            message = message.replace(text, f"{flags[opt]} {value}".rstrip())
    if message == r.reason:
        return r
    out = type(r)(r.rule, message, r.loc, options=r.options)
    out.source = r.source
    return out
