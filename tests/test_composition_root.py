"""One typed Settings (bot/settings.py), one composition root (bot/wiring.py with bot/configs.py):
components take typed configs and never see Settings (issue 16, item 2)."""
from __future__ import annotations

import ast
from pathlib import Path

from bot.settings import Settings
from bot.wiring import Components

ROOT = Path(__file__).resolve().parent.parent


def test_rewrite_settings_reach_the_rewriter(monkeypatch, tmp_path):
    """HYPA_REWRITE_* were read with getattr defaults but never defined, so they were ignored."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    monkeypatch.setenv("HYPA_REWRITE_MAX_TOKENS", "123")
    monkeypatch.setenv("HYPA_REWRITE_EFFORT", "medium")
    monkeypatch.setenv("HYPA_REWRITE_TIMEOUT_S", "3")
    monkeypatch.setenv("HYPA_REWRITE_TOTAL_BUDGET_S", "7")
    rewriter = Components(Settings(data_dir=tmp_path)).rewriter()
    assert rewriter.config.max_tokens == 123 and rewriter.config.effort == "medium"
    assert rewriter.client.config.timeout_s == 3 and rewriter.client.config.total_budget_s == 7


def test_rewrite_settings_default_to_the_llm_ones(monkeypatch, tmp_path):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    settings = Settings(data_dir=tmp_path, llm_timeout_s=11, llm_total_budget_s=22)
    rewriter = Components(settings).rewriter()
    assert rewriter.config.max_tokens == 400 and rewriter.config.effort == "low"
    assert rewriter.client.config.timeout_s == 11 and rewriter.client.config.total_budget_s == 22
    assert rewriter.config.model == settings.fast_model


def _functions_taking_settings(layer: str) -> list[str]:
    found = []
    for path in sorted((ROOT / layer).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for arg in (*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs):
                    # a typed config may be called settings (core.kg.retriever.KGSettings); Settings may not
                    annotation = ast.unparse(arg.annotation) if arg.annotation is not None else "Any"
                    if arg.arg == "settings" and annotation in ("Any", "Settings", "bot.settings.Settings"):
                        found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.name}(settings: {annotation})")
            elif isinstance(node, ast.Call) and ast.unparse(node.func) == "getattr" and node.args:
                if ast.unparse(node.args[0]) in ("settings", "self.settings", "s"):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_core_and_storage_never_see_settings():
    """No `*_from_settings(settings: Any)` with getattr defaults: bot/configs.py builds each
    component's typed config from the one Settings."""
    found = _functions_taking_settings("core") + _functions_taking_settings("storage")
    assert not found, "\n".join(found)


def test_each_model_name_is_defined_once():
    """The fast model's and the answer model's names appear once in the code (core/llm/models.py):
    Settings, the rewriter, the answer generator and the graph extractor take them from there."""
    for name in ("claude-haiku-5-5", "claude-sonnet-5-5"):
        places = [
            str(path.relative_to(ROOT))
            for layer in ("core", "storage", "bot", "adapters")
            for path in (ROOT / layer).rglob("*.py")
            if f'"{name}"' in path.read_text(encoding="utf-8") and path.name != "cost.py"  # cost.py: the price table
        ]
        assert places == ["core/llm/models.py"], (name, places)
