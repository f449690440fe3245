"""What an answer cost: per-model prices in USD per million tokens (MTok) and `estimate_cost`.

Prices: Anthropic pricing page (platform.claude.com/docs/en/about-claude/pricing) and the model
overview pages, as of 2026-11-23 — edit if changed. Only the standard (non-batch) API with 5-minute
cache writes is modelled; the cache-write price is the 5-minute one (this project only writes
`{"type": "ephemeral"}` breakpoints without a TTL).

`usage.input_tokens` in an API response counts only the *uncached* input; cache reads and cache
writes are reported (and billed) separately, so the cost is
    input·in + cache_creation·cache_write + cache_read·cache_read + output·out   (all / 1e6).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from core.errors import UnknownModelPrice

PRICES_AS_OF = "2026-11-23"
PRICES_SOURCE = "Anthropic pricing page (platform.claude.com/docs/en/about-claude/pricing) as of 2026-11-23 — edit if changed"


@dataclass(frozen=True)
class Price:
    """USD per million tokens."""

    input: float
    output: float
    cache_write: float  # 5-minute cache write
    cache_read: float  # cache hits and refreshes
    # Some models bill every token of a request at higher rates once its prompt (input + cache
    # reads + cache writes) exceeds a threshold (Claude Haiku 5.5: 100,000 tokens).
    long_prompt_threshold: int | None = None
    long_prompt: "Price | None" = None


def _p(inp: float, out: float, write: float, read: float, **kw: Any) -> Price:
    return Price(inp, out, write, read, **kw)


# Keys are model ids without a date suffix; dated ids (claude-haiku-4-5-20251001) and variants
# (claude-sonnet-5-5[1m]) resolve to the longest matching key.
PRICES: dict[str, Price] = {
    "claude-fable-5-1": _p(10.00, 50.00, 12.50, 0.25),
    "claude-mythos-5-1": _p(10.00, 50.00, 12.50, 0.25),
    "claude-fable-5": _p(10.00, 50.00, 12.50, 1.00),
    "claude-mythos-5": _p(10.00, 50.00, 12.50, 1.00),
    "claude-opus-5-5": _p(4.00, 20.00, 5.00, 0.20),
    "claude-opus-5": _p(5.00, 25.00, 6.25, 0.50),
    "claude-opus-4-8": _p(5.00, 25.00, 6.25, 0.50),
    "claude-opus-4-7": _p(5.00, 25.00, 6.25, 0.50),
    "claude-opus-4-6": _p(5.00, 25.00, 6.25, 0.50),
    "claude-opus-4-5": _p(5.00, 25.00, 6.25, 0.50),
    "claude-sonnet-5-5": _p(2.00, 10.00, 2.50, 0.10),  # cache reads cut from $0.20 on 2026-10-07
    "claude-sonnet-5": _p(2.00, 10.00, 2.50, 0.20),
    "claude-sonnet-4-6": _p(3.00, 15.00, 3.75, 0.30),
    "claude-sonnet-4-5": _p(3.00, 15.00, 3.75, 0.30),
    "claude-haiku-5-5": _p(
        0.10, 0.50, 0.125, 0.01, long_prompt_threshold=100_000, long_prompt=_p(0.50, 2.50, 0.625, 0.05)
    ),
    "claude-haiku-4-5": _p(1.00, 5.00, 1.25, 0.10),
}

# Generators that call no model cost nothing.
FREE_MODELS = frozenset({"extractive", "none", ""})

_DATE_SUFFIX = re.compile(r"-\d{8}$")


def price_for(model: str) -> Price | None:
    """The price of `model` (exact id, dated id or a `[...]` variant), or None if not in the table."""
    name = model.strip().lower()
    name = name.split("[", 1)[0]
    name = _DATE_SUFFIX.sub("", name)
    if name in PRICES:
        return PRICES[name]
    matches = [k for k in PRICES if name.startswith(k + "-")]
    return PRICES[max(matches, key=len)] if matches else None


def _tokens(usage: Any, name: str) -> int:
    if isinstance(usage, dict):
        value = usage.get(name, 0)
    else:
        value = getattr(usage, name, 0)
    return int(value or 0)


def estimate_cost(usage: Any, model: str) -> float:
    """USD cost of one call. `usage` is a core.types.Usage (or subclass), an SDK Usage or a dict with
    `input_tokens`, `output_tokens` and optionally `cache_creation_input_tokens`,
    `cache_read_input_tokens`. Raises UnknownModelPrice for a model missing from PRICES."""
    if model.strip().lower() in FREE_MODELS:
        return 0.0
    price = price_for(model)
    if price is None:
        raise UnknownModelPrice(f"no price for model {model!r}; add it to core/llm/cost.py PRICES")
    inp = _tokens(usage, "input_tokens")
    out = _tokens(usage, "output_tokens")
    write = _tokens(usage, "cache_creation_input_tokens")
    read = _tokens(usage, "cache_read_input_tokens")
    if price.long_prompt is not None and price.long_prompt_threshold is not None:
        if inp + write + read > price.long_prompt_threshold:
            price = price.long_prompt
    return (inp * price.input + out * price.output + write * price.cache_write + read * price.cache_read) / 1e6


def cost_per_1000_questions(
    model: str, *, context_tokens: int = 1000, prompt_tokens: int = 400, output_tokens: int = 200,
    prompt_cached: bool = False,
) -> float:
    """Estimated USD for 1,000 questions of a typical size (docs/LLM.md). With `prompt_cached`, the
    fixed prompt is read from the prompt cache (if it is long enough to be cached at all)."""
    usage = {
        "input_tokens": context_tokens + (0 if prompt_cached else prompt_tokens),
        "cache_read_input_tokens": prompt_tokens if prompt_cached else 0,
        "output_tokens": output_tokens,
    }
    return 1000 * estimate_cost(usage, model)
