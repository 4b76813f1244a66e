"""docs/architecture.md cannot rot silently (specs/layout.md, LAY-4).

The page names every subpackage of ``sarek_py`` (a row of its package table each), every
module path it names exists (in prose, tables and diagrams alike: ``fusion/loops/fusion.py``,
``host/offload``, ``sarek_py/ir/host/``, ``tests/test_layout.py``), the package table lists
every module of each package, and the spec table has one row per ``specs/*.md`` file with
that file's rule-id prefixes. Each check is a function of the page's text, so the tests at
the end show that each one fails on a page that breaks it.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
DOC = REPO / "docs" / "architecture.md"

#: The packages a path in the page may start with without ``sarek_py/`` (the floors).
FLOOR_DIRS = ("ir", "analysis", "fusion", "codegen", "runtime", "host", "frontend", "cli")
#: Directories of the repository a path in the page may start with.
REPO_DIRS = ("sarek_py", "tests", "specs", "docs", "examples", "benchmarks")

_FLOORS = "|".join(FLOOR_DIRS)
_DIRS = "|".join(REPO_DIRS[1:])
_PKG_PATH = re.compile(rf"(?<![\w/.*-])((?:sarek_py|{_FLOORS})/(?:[\w*]+/)*(?:[\w*]+(?:\.py)?)?)")
_REPO_PATH = re.compile(rf"(?<![\w/.*-])((?:{_DIRS})/(?:[\w*.-]+/)*[\w*.-]*\w/?)")
_SPAN = re.compile(r"`([^`\n]+)`")
_CODE = re.compile(r"[A-Za-z_][\w*.-]*(?:/[\w*.-]+)*/(?:[\w*-]+\.py)?")
_ROW = re.compile(r"^\|\s*`([^`]+)`\s*\|(.*)$", re.M)


def subpackages(root: Path = REPO) -> list[str]:
    """Every subpackage of ``sarek_py`` as a path ``sarek_py/a/b/``."""
    pkg = root / "sarek_py"
    return sorted(f"{d.relative_to(root).as_posix()}/" for d in pkg.rglob("*")
                  if d.is_dir() and (d / "__init__.py").is_file())


def _exists(path: str, root: Path) -> bool:
    """Does ``path`` (repository-relative, maybe a glob) name a file, or, without a suffix,
    a package or a module (``sarek_py/host/offload`` for ``offload.py``)?"""
    path = path.rstrip("/")
    if "*" in path:
        return any(root.glob(path))
    p = root / path
    if p.suffix:
        return p.is_file()
    return (p / "__init__.py").is_file() or p.with_suffix(".py").is_file()


def _in_code(text: str, pos: int) -> bool:
    """Is ``pos`` inside a fenced code block or a code span of ``text``?"""
    before = text[:pos]
    if (before.count("\n```") + before.startswith("```")) % 2 == 1:
        return True
    line = before[before.rfind("\n") + 1:]
    return line.count("`") % 2 == 1


def missing_paths(text: str, root: Path = REPO) -> list[str]:
    """The paths the page names that do not exist: package paths (with or without
    ``sarek_py/``, with or without ``.py``), repository paths (``tests/…``, ``specs/…``)
    and any code span that is a path to a folder or a ``.py`` file (read under
    ``sarek_py/`` unless it starts with a repository directory)."""
    bad: list[str] = []
    for m in _PKG_PATH.finditer(text):
        path = m.group(1)
        if not (_in_code(text, m.start()) or path.startswith("sarek_py/")
                or path.endswith((".py", "/"))):
            continue  # prose such as "host/device" is not a path
        full = path if path.startswith("sarek_py/") else f"sarek_py/{path}"
        if not _exists(full, root):
            bad.append(path)
    for m in _REPO_PATH.finditer(text):
        path = m.group(1)
        if not ((root / path).is_dir() or _exists(path, root)):
            bad.append(path)
    for m in _SPAN.finditer(text):
        path = m.group(1)
        if not _CODE.fullmatch(path):
            continue
        full = path if path.split("/")[0] in REPO_DIRS else f"sarek_py/{path}"
        folder = (root / full).is_dir() and not full.startswith("sarek_py/")
        if not (folder or _exists(full, root)):
            bad.append(path)
    return sorted(set(bad))


_DOTTED = re.compile(r"(?<![\w.])sarek_py(?:\.\w+)+")


def _top_names(body: list[ast.stmt]) -> dict[str, ast.stmt]:
    """The names a module or class body defines, through top-level ``if`` and ``try``."""
    out: dict[str, ast.stmt] = {}
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out[node.name] = node
        elif isinstance(node, ast.Assign):
            for t in node.targets:
                for n in ast.walk(t):
                    if isinstance(n, ast.Name):
                        out[n.id] = node
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            out[node.target.id] = node
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for a in node.names:
                out[(a.asname or a.name).split(".")[0]] = node
        elif isinstance(node, (ast.If, ast.Try)):
            out.update(_top_names(node.body + node.orelse))
    return out


def missing_names(text: str, root: Path = REPO) -> list[str]:
    """The dotted names ``sarek_py.a.b.c`` the page uses that do not resolve, read from the
    source: the longest prefix that is a module or package, then a name it defines (and,
    for a class, a name its body defines)."""
    bad: set[str] = set()
    for m in _DOTTED.finditer(text):
        parts = m.group(0).split(".")
        k = len(parts)
        while k > 0:
            base = root.joinpath(*parts[:k])
            if base.with_suffix(".py").is_file() or (base / "__init__.py").is_file():
                break
            k -= 1
        rest = parts[k:]
        if not rest:
            continue
        base = root.joinpath(*parts[:k])
        src = base.with_suffix(".py") if base.with_suffix(".py").is_file() else base / "__init__.py"
        names = _top_names(ast.parse(src.read_text()).body)
        node = names.get(rest[0])
        if node is None or (len(rest) > 1 and isinstance(node, ast.ClassDef)
                            and rest[1] not in _top_names(node.body)):
            bad.add(m.group(0))
    return sorted(bad)


def table_rows(text: str, first: str) -> dict[str, str]:
    """The rows of the page's tables whose first cell is a code span starting with
    ``first``: that cell's text → the rest of the row."""
    return {m.group(1): m.group(2) for m in _ROW.finditer(text) if m.group(1).startswith(first)}


def package_table_problems(text: str, root: Path = REPO) -> list[str]:
    """Subpackages without a row, rows for no package, modules a row names that its
    package lacks, and modules of a package its row leaves out."""
    rows = table_rows(text, "sarek_py/")
    out: list[str] = []
    for pkg in subpackages(root):
        if pkg not in rows:
            out.append(f"{pkg}: no row in the package table")
    for pkg, rest in rows.items():
        d = root / pkg
        if not (d / "__init__.py").is_file():
            out.append(f"{pkg}: a row for no package")
            continue
        named = set(re.findall(r"`(\w+\.py)`", rest))
        have = {f.name for f in d.glob("*.py") if f.name != "__init__.py"}
        out += [f"{pkg}{n}: named in the package table, not in the tree" for n in sorted(named - have)]
        out += [f"{pkg}{n}: in the tree, not in the package table" for n in sorted(have - named)]
    return out


def rule_prefixes(spec: Path) -> set[str]:
    """The prefixes of the rule ids a spec defines (``**LF-3`` or ``- **AFF-2``)."""
    return set(re.findall(r"\*\*([A-Z]{2,4})-\d+", spec.read_text()))


def spec_table_problems(text: str, root: Path = REPO) -> list[str]:
    """Specs without a row, rows for no spec, and rows whose rule prefixes are not the
    ones the spec defines."""
    rows = table_rows(text, "specs/")
    out: list[str] = []
    for spec in sorted((root / "specs").glob("*.md")):
        name = spec.relative_to(root).as_posix()
        if name not in rows:
            out.append(f"{name}: no row in the spec table")
            continue
        cell = rows[name].split("|")[0]
        listed = set(re.findall(r"\b([A-Z]{2,4})-\*", cell))
        if listed != rule_prefixes(spec):
            out.append(f"{name}: the row lists {sorted(listed)}, the spec defines "
                       f"{sorted(rule_prefixes(spec))}")
    out += [f"{name}: a row for no spec" for name in rows if not (root / name).is_file()]
    return out


# ---------------------------------------------------------------------------------------
# The page as it is.


def test_lay4_every_subpackage_is_named() -> None:
    text = DOC.read_text()
    assert [p for p in subpackages() if p not in text] == []


def test_lay4_every_path_named_exists() -> None:
    assert missing_paths(DOC.read_text()) == []


@pytest.mark.parametrize("page", ["README.md", *sorted(
    p.relative_to(REPO).as_posix() for d in ("docs", "specs") for p in (REPO / d).glob("*.md"))])
def test_lay4_every_path_named_in_the_docs_and_specs_exists(page: str) -> None:
    """The same check on every page a reader follows paths from, and every dotted name
    ``sarek_py.…`` the page uses resolves."""
    text = (REPO / page).read_text()
    assert missing_paths(text) == []
    assert missing_names(text) == []


def test_lay4_the_package_table_matches_the_tree() -> None:
    assert package_table_problems(DOC.read_text()) == []


def test_lay4_every_spec_has_its_row_with_its_rule_prefixes() -> None:
    assert spec_table_problems(DOC.read_text()) == []


def test_lay4_the_page_names_the_floor_checks() -> None:
    text = DOC.read_text()
    for name in ("tests/test_layout.py", "specs/layout.md", "LAY-1", "LAY-2", "LAY-3"):
        assert name in text


# ---------------------------------------------------------------------------------------
# Each check fails on a page that breaks it.


@pytest.mark.parametrize("text, found", [
    ("`fusion/loops/fusion.py` and `fusion/loop_fusion.py`", ["fusion/loop_fusion.py"]),
    ("see sarek_py/launch/offload.py", ["sarek_py/launch/offload.py"]),
    ("host/offload ──► runtime/opencl and launch/", []),
    ("```\na diagram: ir/lexer, ir/lexxer ──►\n```", ["ir/lexxer"]),
    ("`ir/requires*.py`, `ir/nothing*.py`", ["ir/nothing*.py"]),
    ("`tests/test_layout.py`, `tests/test_no_such_file.py`", ["tests/test_no_such_file.py"]),
    ("`specs/layout.md`, specs/nope.md", ["specs/nope.md"]),
    ("`launch/offload.py`, `launch/` and `ir/host/`", ["launch/", "launch/offload.py"]),
    ("`mlir/Interfaces/SideEffectInterfaces` and `a/b`", []),
    ("`ParseError`s/`LaunchError`s", []),
    ("host/device copies, cli/compile", []),
    ("`host/device`, in a span", ["host/device"]),
    ("```\ndiagram: host/devise ──►\n```\nhost/devize in prose", ["host/devise"]),
    ("text\n```\nhost/devise\n```\nhost/devize, `host/devide`", ["host/devide", "host/devise"]),
    ("`sarek_py/ir/host/` and `sarek_py/launch/`", ["sarek_py/launch/"]),
    ("codegen/cstyle.emit(kernel) and fusion/epilogue/sequence.fuse_launches", []),
])
def test_lay4_the_path_check_finds_missing_paths(text: str, found: list[str]) -> None:
    """A path is checked where it starts with a floor or a repository directory, or is a
    code span ending in ``/`` or ``.py`` (``launch/`` in prose is a word, in a code span a
    package); a floor path without ``.py`` or ``/`` only in code (a diagram, a span), as
    "host/device" in prose is a word; dotted attributes after a module are allowed."""
    assert missing_paths(text) == found


@pytest.mark.parametrize("text, found", [
    ("sarek_py.ir.interp.run_kernel, sarek_py.fusion, sarek_py.runtime.get_backend", []),
    ("sarek_py.ir.interp.run_kernels", ["sarek_py.ir.interp.run_kernels"]),
    ("sarek_py.launch.launch.Launch", ["sarek_py.launch.launch.Launch"]),
    ("sarek_py.runtime.base.Backend.run_kernel", []),
    ("sarek_py.runtime.base.Backend.no_such_method", ["sarek_py.runtime.base.Backend.no_such_method"]),
    ("`sarek_py.ir.host.launch.Launch`.", []),
])
def test_lay4_the_name_check_finds_names_that_do_not_resolve(text: str, found: list[str]) -> None:
    assert missing_names(text) == found


def test_lay4_the_subpackage_check_finds_an_unnamed_subpackage() -> None:
    text = DOC.read_text()
    before = [p for p in subpackages() if p not in text]
    text = text.replace("sarek_py/fusion/loops/", "sarek_py/fusion/lööps/")
    assert [p for p in subpackages() if p not in text and p not in before] == [
        "sarek_py/fusion/loops/"]


def test_lay4_the_package_table_check_finds_each_kind_of_drift() -> None:
    text = DOC.read_text()
    row = next(line for line in text.splitlines() if line.startswith("| `sarek_py/codegen/`"))
    before = set(package_table_problems(text))

    def new(page: str) -> set[str]:
        return set(package_table_problems(page)) - before

    assert new(text.replace(row, row.replace("`nvcc.py`", "`gcc.py`"))) == {
        "sarek_py/codegen/gcc.py: named in the package table, not in the tree",
        "sarek_py/codegen/nvcc.py: in the tree, not in the package table"}
    assert new(text.replace(row + "\n", "")) == {"sarek_py/codegen/: no row in the package table"}
    extra = text.replace(row, row + "\n| `sarek_py/launch/` | `offload.py` |")
    assert new(extra) == {"sarek_py/launch/: a row for no package"}


def test_lay4_the_spec_table_check_finds_each_kind_of_drift() -> None:
    text = DOC.read_text()
    row = next(line for line in text.splitlines() if line.startswith("| `specs/tiling.md`"))
    before = set(spec_table_problems(text))

    def new(page: str) -> set[str]:
        return set(spec_table_problems(page)) - before

    assert new(text.replace(row, row.replace("TIL-*", "TL-*"))) == {
        "specs/tiling.md: the row lists ['TL'], the spec defines ['TIL']"}
    assert new(text.replace(row + "\n", "")) == {"specs/tiling.md: no row in the spec table"}
    extra = text.replace(row, row + "\n| `specs/launch-record.md` | LR-* | | |")
    assert new(extra) == {"specs/launch-record.md: a row for no spec"}
