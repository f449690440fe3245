"""Imports run one way: bot -> adapters -> core <- storage (issue 16, item 1).

core/ owns the Protocols and types the others plug into, so it imports none of them; storage/
implements core's Protocols; adapters/ speak to chat platforms through core's services; bot/ is the
composition root (bot/wiring.py) and the only layer that knows every other one. Every import counts,
including those inside functions and under `if TYPE_CHECKING:` (a type named from the layer above is
still a dependency on it).

Beside them, hypa_testkit/ (fakes and harnesses) serves tests/ and bench/: bench/ and the kit import
nothing from tests/, and the shipped layers import neither (issue 16, item 5).
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# layer -> the layers (besides itself) its modules may import
ALLOWED: dict[str, frozenset[str]] = {
    "core": frozenset(),
    "storage": frozenset({"core"}),
    "adapters": frozenset({"core"}),
    "bot": frozenset({"adapters", "core", "storage"}),
}


def imported_modules(tree: ast.AST, package: str) -> list[tuple[int, str]]:
    """(line, absolute module name) of every import in a module of `package` (a dotted name)."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against the importing module's package
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                name = ".".join([*base, node.module] if node.module else base)
            else:
                name = node.module or ""
            found.append((node.lineno, name))
    return found


def imports_in(root: Path, folder: str) -> list[tuple[Path, int, str]]:
    """(path relative to `root`, line, absolute module name) of every import in the folder's modules."""
    found = []
    for path in sorted((root / folder).rglob("*.py")):
        relative = path.relative_to(root)
        package = ".".join(relative.with_suffix("").parts[:-1])
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(relative))
        found += [(relative, line, module) for line, module in imported_modules(tree, package)]
    return found


def upward_imports(root: Path) -> list[str]:
    """`path:line: layer imports module` for every import that crosses the layers the wrong way."""
    problems = []
    for layer, allowed in ALLOWED.items():
        for relative, line, module in imports_in(root, layer):
            target = module.split(".")[0]
            if target in ALLOWED and target != layer and target not in allowed:
                problems.append(f"{relative}:{line}: {layer} imports {module}")
    return problems


def test_imports_run_one_way():
    problems = upward_imports(ROOT)
    assert not problems, (
        "imports must run bot -> adapters -> core <- storage (core owns the Protocols, bot/wiring.py "
        "plugs concrete pieces in):\n" + "\n".join(problems)
    )


@pytest.mark.parametrize(
    ("layer", "source", "bad"),
    [
        ("core", "from storage.index import ChunkIndex\n", True),
        ("core", "if TYPE_CHECKING:\n    from bot.metrics import Metrics\n", True),
        ("core", "def f():\n    import adapters.delivery\n", True),
        ("storage", "from core.types import Chunk\n", False),
        ("storage", "from bot.settings import Settings\n", True),
        ("adapters", "from core.conversation import Reply\n", False),
        ("adapters", "from storage.sql import ConversationStore\n", True),
        ("bot", "from storage.embedded import EmbeddedIndex\nfrom adapters import terminal\n", False),
        ("core", "from . import types\nfrom .kg import model\n", False),
    ],
)
def test_the_check_sees_every_kind_of_import(tmp_path, layer, source, bad):
    """The check itself: module-level, lazy and TYPE_CHECKING imports of another layer all count."""
    for name in ALLOWED:
        (tmp_path / name).mkdir()
    (tmp_path / layer / "module.py").write_text(source, encoding="utf-8")
    assert bool(upward_imports(tmp_path)) is bad


# --- the test kit: bench/ and tests/ share hypa_testkit/; nothing shipped depends on either ----------

# folder -> top-level packages its modules must not import
FORBIDDEN: dict[str, frozenset[str]] = {
    "bench": frozenset({"tests"}),  # a benchmark runs against the kit, not against test modules
    "hypa_testkit": frozenset({"tests"}),  # else bench/ would reach tests/ through the kit
    **{layer: frozenset({"tests", "hypa_testkit"}) for layer in ALLOWED},  # not in the wheel
}


def forbidden_imports(root: Path) -> list[str]:
    """`path:line: imports module` for every import of a package its folder must not use."""
    return [
        f"{relative}:{line}: imports {module}"
        for folder, forbidden in FORBIDDEN.items()
        for relative, line, module in imports_in(root, folder)
        if module.split(".")[0] in forbidden
    ]


def test_bench_and_the_kit_import_nothing_from_tests_and_nothing_shipped_imports_the_kit():
    problems = forbidden_imports(ROOT)
    assert not problems, (
        "bench/ and hypa_testkit/ must not import from tests/ (move what both need into hypa_testkit/), and "
        "bot/ core/ storage/ adapters/ must import neither (they are not in the wheel):\n" + "\n".join(problems)
    )


@pytest.mark.parametrize(
    ("folder", "source", "bad"),
    [
        ("bench", "from tests.helpers import TOY_CHUNKS\n", True),
        ("bench", "def main():\n    from tests.fakes.slack_server import FakeSlack\n", True),
        ("bench", "import tests.crash_bot\n", True),
        ("bench", "from hypa_testkit.slack_harness import running_bot\n", False),
        ("hypa_testkit", "from tests.test_telegram_bot import BotProcess\n", True),
        ("bot", "from hypa_testkit.fakes.slack_server import FakeSlack\n", True),
        ("adapters", "from core.conversation import Reply\n", False),
    ],
)
def test_the_kit_check_sees_each_forbidden_import(tmp_path, folder, source, bad):
    (tmp_path / folder).mkdir()
    (tmp_path / folder / "module.py").write_text(source, encoding="utf-8")
    assert bool(forbidden_imports(tmp_path)) is bad


def test_the_kit_and_the_tests_are_not_packaged_in_the_wheel():
    """pyproject.toml's package list picks hypa's own packages only (the wheel would otherwise ship the
    fakes and their test tokens)."""
    import tomllib

    from setuptools import find_namespace_packages

    found = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]["packages"]["find"]
    packaged = find_namespace_packages(str(ROOT), include=found["include"], exclude=found.get("exclude", ()))
    assert {"bot", "core", "storage", "adapters", "prompts"} <= set(packaged)
    assert not [p for p in packaged if p.split(".")[0] in {"hypa_testkit", "tests", "bench"}]
