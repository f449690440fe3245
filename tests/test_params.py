"""Retrieval parameter mappings: the paper's tables, fallback, validation errors."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from core.errors import ConfigError
from core.params import DEFAULT_CONFIG_PATH, ParamRow, load_configs, parse_configs

# HyPA-RAG (arXiv 2409.09046): label -> (top_k, Q, K, S).
PAPER_2CLASS = {0: (5, 3, 4, 2), 1: (10, 5, 5, 3)}
PAPER_3CLASS = {0: (3, 3, 3, 1), 1: (5, 5, 4, 2), 2: (7, 7, 5, 3)}


def _tuple(row: ParamRow) -> tuple[int, int, int, int]:
    return (row.top_k, row.q, row.kg_keywords, row.kg_depth)


@pytest.fixture(scope="module")
def configs():
    return load_configs()


def test_shipped_file_has_the_named_configs(configs):
    assert DEFAULT_CONFIG_PATH.name == "retrieval_configs.toml"
    assert {"fixed-k3", "fixed-k5", "fixed-k7", "fixed-k10", "pa-2class", "pa-3class"} <= set(configs)


@pytest.mark.parametrize(("name", "table", "classes"), [("pa-2class", PAPER_2CLASS, 2), ("pa-3class", PAPER_3CLASS, 3)])
def test_every_label_maps_to_its_paper_row(configs, name, table, classes):
    config = configs[name]
    assert config.adaptive and config.classes == classes
    rows = {label: config.params_for(label) for label in range(classes)}
    for label, expected in table.items():
        assert _tuple(rows[label]) == expected, f"{name} label {label}"
        assert rows[label].fallback is False
    # The rows differ: a lookup that silently returned one default row for every label would fail here.
    assert len({_tuple(r) for r in rows.values()}) == classes


def test_numpy_labels_map_like_ints(configs):
    assert _tuple(configs["pa-3class"].params_for(np.int64(2))) == PAPER_3CLASS[2]


@pytest.mark.parametrize("bad", ["1", 1.0, True, 3, -1])
def test_wrong_labels_are_refused_not_defaulted(configs, bad):
    # The reference code compared labels of the wrong type and silently used defaults: we refuse.
    with pytest.raises(ValueError, match="label"):
        configs["pa-3class"].params_for(bad)


def test_label_2_is_outside_the_2class_table(configs):
    with pytest.raises(ValueError, match="2-class"):
        configs["pa-2class"].params_for(2)


@pytest.mark.parametrize("name", ["pa-2class", "pa-3class"])
def test_no_label_uses_the_flagged_fallback_row(configs, name):
    row = configs[name].params_for(None)
    assert row.fallback is True
    assert row.top_k == 5  # documented: the same k as fixed-k5


@pytest.mark.parametrize(("name", "k"), [("fixed-k3", 3), ("fixed-k5", 5), ("fixed-k7", 7), ("fixed-k10", 10)])
def test_fixed_configs_ignore_the_label(configs, name, k):
    config = configs[name]
    assert not config.adaptive
    for label in (None, 0, 1, 2):
        row = config.params_for(label)
        assert (row.top_k, row.q, row.fallback) == (k, 1, False)


# --- validation ---------------------------------------------------------------------------------


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "configs.toml"
    path.write_text(text, encoding="utf-8")
    return path


GOOD_ADAPTIVE = """
[configs.ok]
classes = 2
labels.0 = { top_k = 5, q = 3, kg_keywords = 4, kg_depth = 2 }
labels.1 = { top_k = 10, q = 5, kg_keywords = 5, kg_depth = 3 }
fallback = { top_k = 5, q = 3, kg_keywords = 4, kg_depth = 2 }
"""


def test_a_valid_custom_file_loads(tmp_path):
    configs = load_configs(_write(tmp_path, GOOD_ADAPTIVE))
    assert _tuple(configs["ok"].params_for(1)) == (10, 5, 5, 3)


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("[configs.x]\ntopk = 3\nq = 1\nkg_keywords = 1\nkg_depth = 1\n", "configs.x.topk"),
        ("[configs.x]\ntop_k = 0\nq = 1\nkg_keywords = 1\nkg_depth = 1\n", "configs.x.top_k"),
        ("[configs.x]\ntop_k = 3\nq = 1\nkg_keywords = 1\n", "kg_depth"),
        (GOOD_ADAPTIVE.replace("labels.1 = { top_k = 10", "labels.1 = { top_k = -1"), "configs.ok.labels.1.top_k"),
        (GOOD_ADAPTIVE.replace("labels.1 = { top_k = 10,", "labels.1 = { k = 10,"), "configs.ok.labels.1.k"),
        (GOOD_ADAPTIVE.replace("classes = 2", "classes = 3"), "no row for label(s) [2]"),
        (GOOD_ADAPTIVE.replace("labels.1", "labels.4"), "label(s) [4] outside"),
        (GOOD_ADAPTIVE.replace("fallback = { top_k = 5, q = 3, kg_keywords = 4, kg_depth = 2 }", ""), "missing fallback"),
        (GOOD_ADAPTIVE + "top_k = 4\n", "must not also set top_k"),
        (GOOD_ADAPTIVE.replace("classes = 2", "classes = 5"), "configs.ok.classes"),
        ("[configs.x]\ntop_k = 'five'\nq = 1\nkg_keywords = 1\nkg_depth = 1\n", "configs.x.top_k"),
        ("[other]\na = 1\n", "unknown top-level key"),
        ("[configs]\n", "no [configs.NAME] tables"),
        ("[configs.x\n", "not valid TOML"),
    ],
)
def test_validation_errors_name_the_bad_key(tmp_path, text, needle):
    with pytest.raises(ConfigError) as info:
        load_configs(_write(tmp_path, text))
    assert needle in str(info.value)


def test_every_bad_config_is_reported_at_once():
    with pytest.raises(ConfigError) as info:
        parse_configs({"configs": {"a": {"top_k": 0, "q": 1, "kg_keywords": 1, "kg_depth": 1}, "b": {"q": 1}}})
    message = str(info.value)
    assert "configs.a.top_k" in message and "configs.b" in message


def test_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_configs(tmp_path / "nope.toml")


# --- token budget and novelty rule (issue 3) ------------------------------------------------------


def test_budget_config_gives_each_label_its_budget(configs):
    config = configs["pa-2class-budget"]
    assert config.adaptive and config.classes == 2
    small, large = config.params_for(0), config.params_for(1)
    assert (small.max_context_tokens, large.max_context_tokens) == (1000, 1500)
    assert small.min_novelty == large.min_novelty == 0.4
    fallback = config.params_for(None)
    assert fallback.fallback is True and 1000 <= fallback.max_context_tokens <= 1500


@pytest.mark.parametrize("name", ["fixed-k7", "pa-2class", "pa-3class"])
def test_rows_without_the_optional_fields_have_no_budget_and_no_novelty_rule(configs, name):
    config = configs[name]
    for label in [None, *range(config.classes or 1)]:
        row = config.params_for(label)
        assert (row.max_context_tokens, row.min_novelty) == (0, 0.0)


def test_fixed_config_can_set_the_optional_fields(tmp_path):
    text = "[configs.x]\ntop_k = 9\nq = 1\nkg_keywords = 1\nkg_depth = 1\nmax_context_tokens = 800\nmin_novelty = 0.25\n"
    row = load_configs(_write(tmp_path, text))["x"].params_for(None)
    assert (row.top_k, row.max_context_tokens, row.min_novelty, row.fallback) == (9, 800, 0.25, False)


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        (
            GOOD_ADAPTIVE.replace("kg_depth = 3 }", "kg_depth = 3, max_context_tokens = -5 }"),
            "configs.ok.labels.1.max_context_tokens",
        ),
        (GOOD_ADAPTIVE.replace("kg_depth = 3 }", "kg_depth = 3, min_novelty = 1.0 }"), "configs.ok.labels.1.min_novelty"),
        (GOOD_ADAPTIVE.replace("kg_depth = 3 }", "kg_depth = 3, min_novelty = -0.1 }"), "configs.ok.labels.1.min_novelty"),
        (GOOD_ADAPTIVE.replace("kg_depth = 3 }", "kg_depth = 3, max_tokens = 900 }"), "configs.ok.labels.1.max_tokens"),
        (GOOD_ADAPTIVE + "max_context_tokens = 900\n", "must not also set max_context_tokens"),
        (
            "[configs.x]\ntop_k = 3\nq = 1\nkg_keywords = 1\nkg_depth = 1\nmax_context_tokens = 'lots'\n",
            "configs.x.max_context_tokens",
        ),
    ],
)
def test_bad_budget_or_novelty_is_refused_at_load(tmp_path, text, needle):
    with pytest.raises(ConfigError) as info:
        load_configs(_write(tmp_path, text))
    assert needle in str(info.value)


class _FixedLabel:
    def __init__(self, label: int):
        self.label = label

    def predict(self, question, vector=None) -> int:
        return self.label


@pytest.mark.parametrize(("label", "budget"), [(0, 1000), (1, 1500)])
def test_policy_hands_the_labels_budget_to_retrieval(configs, label, budget):
    from core.adaptive import ConfigPolicy
    from core.types import RetrievalParams

    base = RetrievalParams(top_k=7, fusion="rankedFusion", alpha=0.5)
    params, got = ConfigPolicy(configs["pa-2class-budget"], base, _FixedLabel(label)).select("q?", None)
    assert got == label
    assert (params.max_context_tokens, params.min_novelty, params.config) == (budget, 0.4, "pa-2class-budget")
    unlabelled, none = ConfigPolicy(configs["pa-2class-budget"], base, None).select("q?", None)
    assert none is None and unlabelled.fallback and unlabelled.max_context_tokens == 1200


def test_budget_and_novelty_are_accepted_with_the_knowledge_graph(tmp_path):
    text = GOOD_ADAPTIVE.replace("classes = 2", "kg = true\nclasses = 2").replace(
        "kg_depth = 3 }", "kg_depth = 3, max_context_tokens = 900 }"
    )
    assert load_configs(_write(tmp_path, text))
    fixed = "[configs.x]\nkg = true\ntop_k = 3\nq = 1\nkg_keywords = 1\nkg_depth = 1\nmin_novelty = 0.3\n"
    assert load_configs(_write(tmp_path, fixed))["x"].params_for(None).min_novelty == 0.3

