"""Which of the fused, ranked chunks go to the generator: top_k, an optional token budget, and an
optional novelty rule.

Chunks cut along the law's units vary from ~30 to ~500 tokens, so "the first k" spends most of the
context on whichever long provisions rank high. With a budget (`max_context_tokens`) the ranking is
walked in order and a chunk that does not fit in what is left is skipped, so a shorter one further
down can still come in. With `min_novelty`, a chunk whose distinct words are mostly in the chunks
already kept (the law as enacted and as codified, a section and the commentary quoting it) is
skipped too: it costs tokens and adds almost nothing. The first-ranked chunk is always kept, so a
question never goes to the generator with no context because its best provision is long.

With neither set this is exactly `ranked[:top_k]`.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence

from core.text import word_set
from core.types import RetrievalParams, ScoredChunk


def select_contexts(
    ranked: Sequence[ScoredChunk], params: RetrievalParams, count_tokens: Callable[[str], int]
) -> list[ScoredChunk]:
    """At most `params.top_k` chunks of `ranked`, in rank order, within the budget and novelty rule."""
    budget = params.max_context_tokens
    novelty = params.min_novelty
    if budget <= 0 and novelty <= 0:
        return list(ranked[: params.top_k])
    kept: list[ScoredChunk] = []
    used = 0
    seen: set[str] = set()
    for sc in ranked:
        if len(kept) >= params.top_k:
            break
        words = word_set(sc.chunk.text)
        if kept and novelty > 0 and (not words or len(words - seen) / len(words) < novelty):
            continue
        size = count_tokens(sc.chunk.text) if budget > 0 else 0
        if kept and budget > 0 and used + size > budget:
            continue
        kept.append(sc)
        used += size
        seen |= words
    return kept
