"""Names of the Python constructs outside the kernel subset, for error messages (FE-12)."""

from __future__ import annotations

import ast

EXPRESSIONS: dict[type, str] = {
    ast.ListComp: "list comprehension",
    ast.SetComp: "set comprehension",
    ast.DictComp: "dict comprehension",
    ast.GeneratorExp: "generator expression",
    ast.Lambda: "lambda",
    ast.List: "list",
    ast.Tuple: "tuple",
    ast.Dict: "dict",
    ast.Set: "set",
    ast.JoinedStr: "f-string",
    ast.FormattedValue: "f-string",
    ast.Await: "await",
    ast.Yield: "yield",
    ast.YieldFrom: "yield from",
    ast.NamedExpr: "assignment expression (:=)",
    ast.Starred: "starred expression",
    ast.Slice: "slice",
}

STATEMENTS: dict[type, str] = {
    ast.With: "with statement",
    ast.AsyncWith: "async with statement",
    ast.AsyncFor: "async for loop",
    ast.Try: "try statement",
    ast.TryStar: "try statement",
    ast.Raise: "raise statement",
    ast.Assert: "assert statement",
    ast.Import: "import statement",
    ast.ImportFrom: "import statement",
    ast.Global: "global declaration",
    ast.Nonlocal: "nonlocal declaration",
    ast.FunctionDef: "nested function definition",
    ast.AsyncFunctionDef: "nested function definition",
    ast.ClassDef: "class definition",
    ast.Delete: "del statement",
    ast.Match: "match statement",
}


def describe(node: ast.AST) -> str:
    """A human name for ``node``'s construct."""
    table = EXPRESSIONS if isinstance(node, ast.expr) else STATEMENTS
    for cls, name in table.items():
        if isinstance(node, cls):
            return name
    return type(node).__name__
