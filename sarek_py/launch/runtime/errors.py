"""The error of a launch the runtime cannot make (specs/launch.md), below every runtime
module so that the launch checks (``limits``) and the backends can share it."""

from __future__ import annotations

from sarek_py.ir.diagnostics import SarekError


class LaunchError(SarekError):
    """A launch the runtime cannot make: missing or ill-typed arguments, a bad block size …"""


__all__ = ["LaunchError"]
