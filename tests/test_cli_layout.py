"""The command line's layout (specs/layout.md, LAY-5; docs/cli.md, CLI-9): one module per
subcommand, named like it, that only ``sarek_py/cli/main.py`` imports; shared modules that
register nothing; a subcommand registered from outside the package offered too."""

from __future__ import annotations

import argparse
import ast
import subprocess
import sys
import textwrap
from collections.abc import Iterable
from pathlib import Path

from test_layout import graph, modules

from sarek_py.cli.emit import emit_command
from sarek_py.cli.main import BUILTIN, commands
from sarek_py.cli.registry import Command

ROOT = Path(__file__).resolve().parent.parent
CLI = "sarek_py.cli"
#: the subcommands ``sarek-py --help`` lists, in its order (CLI-3)
NAMES = ["print", "check", "run", "emit", "opt", "fuse", "explain"]


def misplaced(cmds: Iterable[Command]) -> list[str]:
    """LAY-5: each subcommand whose runner is not defined in ``sarek_py.cli.<name>``, and
    each module whose runners more than one subcommand registers."""
    out: list[str] = []
    by_module: dict[str, list[str]] = {}
    for c in cmds:
        mod = c.run.__module__
        by_module.setdefault(mod, []).append(c.name)
        if mod != f"{CLI}.{c.name}":
            out.append(f"{c.name}: runner in {mod}, not {CLI}.{c.name}")
    out += [f"{m} registers {', '.join(ns)}" for m, ns in by_module.items() if len(ns) > 1]
    return sorted(out)


def builtin() -> list[Command]:
    return [c for c in commands() if c.run in BUILTIN]


def registrations(path: Path) -> int:
    """How many calls of ``command(…)`` (the registry's decorator) a module's source holds."""
    n = 0
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(
                f, ast.Attribute) else None
            n += name == "command"
    return n


def test_lay5_each_builtin_subcommand_is_its_own_module() -> None:
    cmds = builtin()
    assert [c.name for c in cmds] == NAMES
    assert misplaced(cmds) == []


def test_lay5_the_check_finds_a_misplaced_subcommand() -> None:
    """The check can fail: a runner defined elsewhere, and one module registering two."""

    def runner(args: argparse.Namespace) -> int:
        return 0

    def configure(p: argparse.ArgumentParser) -> None:
        return None

    here = runner.__module__
    assert misplaced([Command("print", "h", configure, runner)]) == [
        f"print: runner in {here}, not sarek_py.cli.print"]
    assert misplaced([Command("emit", "h", configure, emit_command),
                      Command("emit2", "h", configure, emit_command)]) == [
        "emit2: runner in sarek_py.cli.emit, not sarek_py.cli.emit2",
        "sarek_py.cli.emit registers emit, emit2"]


def test_lay5_only_main_imports_a_subcommand_module() -> None:
    edges = graph()
    subs = {f"{CLI}.{n}" for n in NAMES}
    bad = sorted(f"{m} imports {t}" for m, ts in edges.items() for t in ts
                 if t in subs and m != f"{CLI}.main")
    assert bad == []
    assert subs <= edges[f"{CLI}.main"]


def test_lay5_shared_modules_register_no_subcommand() -> None:
    """Every subcommand module registers one subcommand; every other module of the package
    (the registry, which defines ``command``, aside) registers none."""
    subs = {f"{CLI}.{n}" for n in NAMES}
    counts = {m: registrations(p) for m, p in modules().items()
              if (m == CLI or m.startswith(CLI + ".")) and m != f"{CLI}.registry"}
    assert {m: n for m, n in counts.items() if m in subs} == dict.fromkeys(subs, 1)
    assert {m: n for m, n in counts.items() if m not in subs and n} == {}
    assert registrations(ROOT / "tests" / "test_cli.py") >= 1  # the count sees a decorator


HELLO = '''
from sarek_py.cli.loading import load_module
from sarek_py.cli.registry import UsageError, command


def configure(p):
    p.add_argument("file")
    p.add_argument("--shout", action="store_true")


@command("hello", "greet the kernels of a file", configure)
def hello(args):
    if args.shout:
        raise UsageError("no shouting")
    for k in load_module(args.file).kernels:
        print("hello", k.name)
    return 0
'''

SCRIPT = '''
import sys

import hello_cmd  # registers 'hello'
from sarek_py.cli.main import main

sys.exit(main(sys.argv[1:]))
'''


def test_cli9_a_module_outside_the_package_adds_a_subcommand(tmp_path: Path) -> None:
    """CLI-9: a module imported before ``main`` registers a subcommand with the documented
    decorator; ``main`` offers it after the built-in ones, with the same error handling."""
    (tmp_path / "hello_cmd.py").write_text(textwrap.dedent(HELLO))
    (tmp_path / "script.py").write_text(textwrap.dedent(SCRIPT))

    def run(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, str(tmp_path / "script.py"), *argv],
                              capture_output=True, text=True, timeout=120, cwd=ROOT)

    got = run("hello", "examples/saxpy.sk")
    assert (got.returncode, got.stdout, got.stderr) == (0, "hello saxpy\n", "")
    got = run("--help")
    listed = [line.split()[0] for line in got.stdout.splitlines()
              if line.startswith("    ") and not line.startswith("     ")]
    assert got.returncode == 0 and listed == [*NAMES, "hello"]
    got = run("hello", "examples/saxpy.sk", "--shout")
    assert got.returncode == 2
    assert got.stderr.splitlines()[-1] == "sarek-py hello: error: no shouting"
    got = run("hello", "nope.sk")
    assert (got.returncode, got.stderr) == (1, "error: cannot read 'nope.sk': no such file\n")


def test_lay5_the_main_module_runs_as_a_script() -> None:
    """``python -m sarek_py.cli.main`` offers every built-in subcommand (no module imported
    twice under two names registers them apart)."""
    got = subprocess.run([sys.executable, "-m", "sarek_py.cli.main", "--help"],
                         capture_output=True, text=True, timeout=120, cwd=ROOT)
    listed = [line.split()[0] for line in got.stdout.splitlines()
              if line.startswith("    ") and not line.startswith("     ")]
    assert got.returncode == 0 and listed == NAMES
    got = subprocess.run([sys.executable, "-m", "sarek_py.cli", "run", "--help"],
                         capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert got.returncode == 0 and "--compare BACKEND" in got.stdout
