"""Retrieval parameter mappings as data: query-complexity label -> (top_k, Q, K, S).

The mappings live in `bot/retrieval_configs.toml` and are validated here at load time, so a typo
in a key or a missing label row fails with a message that names it, instead of silently falling
back to defaults (the HyPA-RAG reference code compared labels of the wrong type, so every query
used the default row: `params_for` looks labels up by int and refuses unknown ones).

    configs = load_configs()
    row = configs["pa-3class"].params_for(label)   # label from ComplexityClassifier, or None
    row.top_k, row.q, row.kg_keywords, row.kg_depth, row.fallback
    row.max_context_tokens, row.min_novelty             # optional: 0 = no token budget / no novelty rule
"""
from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from core.errors import ConfigError

DEFAULT_CONFIG_PATH = Path(__file__).resolve().parent.parent / "bot" / "retrieval_configs.toml"


class RowSpec(BaseModel):
    """One row of a mapping as written in the file: the parameters one question is retrieved with."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    top_k: int = Field(ge=1, le=100)
    q: int = Field(ge=1, le=20)  # queries searched: the question + (q - 1) rewrites
    kg_keywords: int = Field(ge=0, le=50)  # K
    kg_depth: int = Field(ge=0, le=10)  # S
    # Token budget for the chunks kept after fusion (0 = none: top_k alone decides); see
    # core/context_budget.py. top_k still caps how many chunks are kept.
    max_context_tokens: int = Field(default=0, ge=0, le=100_000)
    # Share of a chunk's distinct words that must be new to the chunks already kept (0 = keep
    # every chunk): skips a provision that mostly repeats one kept above it.
    min_novelty: float = Field(default=0.0, ge=0.0, lt=1.0)

    def row(self, *, fallback: bool = False) -> ParamRow:
        return ParamRow(**self.model_dump(), fallback=fallback)


class ParamRow(RowSpec):
    """The row a lookup returns. `fallback` is True when it was used because there was no label."""

    fallback: bool = False


_ROW_FIELDS = tuple(RowSpec.model_fields)
_REQUIRED_ROW_FIELDS = tuple(name for name, field in RowSpec.model_fields.items() if field.is_required())
_ADAPTIVE_FIELDS = ("classes", "labels", "fallback")
# A fixed config writes its row at the top level of its table; validation errors are reported there.
_FIXED_ROW = "row"


class RetrievalConfig(BaseModel):
    """A named mapping: either fixed (the row fields at the top level) or adaptive (`classes` + `labels`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    description: str = ""
    kg: bool = False  # knowledge-graph stage on (hypa-*, fixed-*-kg): K and S of the rows are used
    row: RowSpec | None = None  # fixed configs
    # Adaptive configs.
    classes: int | None = Field(default=None, ge=2, le=3)
    labels: dict[int, RowSpec] | None = None
    fallback: RowSpec | None = None

    @model_validator(mode="before")
    @classmethod
    def _gather_fixed_row(cls, data: Any) -> Any:
        """Move a fixed config's top-level row fields into `row`; refuse a table that mixes both kinds."""
        if not isinstance(data, dict) or _FIXED_ROW in data:
            return data
        present = [k for k in _ROW_FIELDS if k in data]
        if any(k in data for k in _ADAPTIVE_FIELDS):
            if present:
                raise ValueError(
                    f"adaptive config (has classes/labels/fallback) must not also set {', '.join(present)}; "
                    "put them in labels.N or fallback"
                )
            return data
        if not present:
            raise ValueError(
                f"fixed config is missing {', '.join(_REQUIRED_ROW_FIELDS)} "
                "(or give classes/labels/fallback for an adaptive config)"
            )
        # A partial row fails RowSpec's validation, which names each missing field (with unknown keys).
        rest = {k: v for k, v in data.items() if k not in present}
        return {**rest, _FIXED_ROW: {k: data[k] for k in present}}

    @model_validator(mode="after")
    def _adaptive_rows_complete(self) -> RetrievalConfig:
        if self.row is not None:
            if any(getattr(self, k) is not None for k in _ADAPTIVE_FIELDS):
                raise ValueError("a config is fixed (row) or adaptive (classes/labels/fallback), not both")
            return self
        missing = [k for k in _ADAPTIVE_FIELDS if getattr(self, k) is None]
        if missing:
            raise ValueError(f"adaptive config is missing {', '.join(missing)}")
        assert self.classes is not None  # checked just above
        expected = set(range(self.classes))
        got = set(self.labels)  # type: ignore[arg-type]
        if got != expected:
            extra = sorted(got - expected)
            lacking = sorted(expected - got)
            parts = []
            if lacking:
                parts.append(f"no row for label(s) {lacking}")
            if extra:
                parts.append(f"row(s) for label(s) {extra} outside 0..{self.classes - 1}")
            raise ValueError(f"labels: {'; '.join(parts)} (classes = {self.classes})")
        return self

    @property
    def adaptive(self) -> bool:
        return self.classes is not None

    def params_for(self, label: int | None) -> ParamRow:
        """The row for a classifier label; fixed configs ignore the label.

        Adaptive configs with `label=None` (no classifier) return the documented fallback row with
        `fallback=True`. A label outside 0..classes-1 (or not an int) is a bug upstream: ValueError.
        """
        if self.row is not None:
            return self.row.row()
        if label is None:
            return self.fallback.row(fallback=True)  # type: ignore[union-attr]
        assert self.classes is not None  # adaptive (validated)
        # bool is an int subclass and numpy ints are not ints: normalise explicitly, never guess.
        if isinstance(label, bool) or not _is_integer(label):
            raise ValueError(f"config {self.name!r}: label must be an int, got {label!r} ({type(label).__name__})")
        key = int(label)
        if key not in self.labels:  # type: ignore[operator]
            raise ValueError(
                f"config {self.name!r} is for a {self.classes}-class classifier; label {key} is not in "
                f"0..{self.classes - 1} (is the classifier trained with the same number of classes?)"
            )
        return self.labels[key].row()  # type: ignore[index]


def _is_integer(value: Any) -> bool:
    if isinstance(value, int):
        return True
    try:
        import numpy as np

        return isinstance(value, np.integer)
    except ImportError:  # pragma: no cover
        return False


def _format_errors(name: str, exc: ValidationError) -> str:
    lines = []
    for error in exc.errors():
        parts = list(error["loc"])
        if parts[:1] == [_FIXED_ROW]:
            parts = parts[1:]
        loc = ".".join(str(part) for part in parts)
        where = f"configs.{name}" + (f".{loc}" if loc else "")
        lines.append(f"  {where}: {error['msg']}")
    return "\n".join(lines)


def parse_configs(data: dict[str, Any], source: str = "<data>") -> dict[str, RetrievalConfig]:
    """Validate the parsed TOML document; ConfigError lists every bad key with its full path."""
    unknown = sorted(set(data) - {"configs"})
    if unknown:
        raise ConfigError(f"{source}: unknown top-level key(s) {unknown}; expected only [configs.NAME] tables")
    configs = data.get("configs")
    if not isinstance(configs, dict) or not configs:
        raise ConfigError(f"{source}: no [configs.NAME] tables found")
    result: dict[str, RetrievalConfig] = {}
    problems: list[str] = []
    for name, body in configs.items():
        if not isinstance(body, dict):
            problems.append(f"  configs.{name}: must be a table, got {type(body).__name__}")
            continue
        try:
            result[name] = RetrievalConfig(name=name, **body)
        except ValidationError as exc:
            problems.append(_format_errors(name, exc))
        except TypeError as exc:  # e.g. a `name` key in the file clashing with the table name
            problems.append(f"  configs.{name}: {exc}")
    if problems:
        raise ConfigError(f"{source}: invalid retrieval config:\n" + "\n".join(problems))
    return result


def load_configs(path: str | Path = DEFAULT_CONFIG_PATH) -> dict[str, RetrievalConfig]:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise ConfigError(f"retrieval config file {path} does not exist") from exc
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from exc
    return parse_configs(data, source=str(path))


def get_config(name: str, path: str | Path = DEFAULT_CONFIG_PATH) -> RetrievalConfig:
    configs = load_configs(path)
    try:
        return configs[name]
    except KeyError:
        raise ConfigError(f"unknown retrieval config {name!r}; known: {', '.join(sorted(configs))}") from None
