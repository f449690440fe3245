"""Evaluation: run a dataset through the pipeline (`run`), score the results (`metrics`, `report`)."""

from core.errors import DatasetError
from core.eval.report import (
    DEFAULT_SCOPE_REVIEW,
    GroupStats,
    Report,
    ScopeVerdict,
    build_report,
    load_scope_review,
    render_markdown,
    render_rich,
)
from core.eval.run import Answerer, EvalItem, RunSummary, read_items, run_eval

__all__ = [
    "Answerer",
    "DatasetError",
    "EvalItem",
    "RunSummary",
    "read_items",
    "run_eval",
    "DEFAULT_SCOPE_REVIEW",
    "GroupStats",
    "Report",
    "ScopeVerdict",
    "build_report",
    "load_scope_review",
    "render_markdown",
    "render_rich",
]
