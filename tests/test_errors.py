"""Errors live in one place, core/errors.py, with their hierarchy in its docstring (issue 16, item 4)."""
from __future__ import annotations

import ast
import inspect
from pathlib import Path

import core.errors as errors

ROOT = Path(__file__).resolve().parent.parent


def _error_classes() -> dict[str, type[BaseException]]:
    return {
        name: value for name, value in vars(errors).items()
        if inspect.isclass(value) and issubclass(value, BaseException) and value.__module__ == errors.__name__
    }


def test_no_exception_class_is_defined_outside_the_errors_module():
    """core/ and storage/ define no exception class of their own (bot/ and adapters/ keep their
    setup and control-flow errors)."""
    known = set(_error_classes()) | {n for n in dir(__import__("builtins")) if n.endswith(("Error", "Exception"))}
    found = []
    for layer in ("core", "storage"):
        for path in sorted((ROOT / layer).rglob("*.py")):
            if path == ROOT / "core" / "errors.py":
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.ClassDef):
                    bases = {ast.unparse(b).split(".")[-1] for b in node.bases}
                    if bases & known:
                        found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.name}")
    assert not found, "define these in core/errors.py:\n" + "\n".join(found)


def _tree() -> list[tuple[int, str]]:
    """(depth, class name) of each line of the docstring's hierarchy, in order."""
    nodes = []
    for line in errors.__doc__.splitlines():
        stripped = line.lstrip("│ ├└─")
        name = stripped.split(" ")[0] if stripped else ""
        if name in _error_classes():
            nodes.append((len(line) - len(stripped), name))
    return nodes


def test_every_error_is_a_hypa_error_and_in_the_docstring():
    classes = _error_classes()
    assert len(classes) > 30
    assert all(issubclass(cls, errors.HypaError) for cls in classes.values())
    assert sorted(name for _, name in _tree()) == sorted(classes)


def test_the_docstring_shows_each_errors_real_parent():
    """A line `├── Child` under `│   Parent` in the tree means Child subclasses Parent."""
    classes = _error_classes()
    stack: list[tuple[int, str]] = []
    for depth, name in _tree():
        while stack and stack[-1][0] >= depth:
            stack.pop()
        if stack:
            assert classes[stack[-1][1]] in classes[name].__bases__, f"{name} is not a {stack[-1][1]}"
        stack.append((depth, name))


def test_each_keeps_the_builtin_kind_callers_catch():
    assert issubclass(errors.ConfigError, ValueError)
    assert issubclass(errors.CollectionNotFound, LookupError)
    assert issubclass(errors.EmbeddingModelNotFound, FileNotFoundError)
    assert issubclass(errors.IndexUnavailable, RuntimeError)
    assert issubclass(errors.WeaviateUnavailable, errors.IndexUnavailable)
    assert issubclass(errors.KGLimitExceeded, errors.UnsafeKGFile)
