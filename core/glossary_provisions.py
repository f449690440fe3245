"""The provisions a glossary's words for a user's phrase point to.

A glossary entry often names words only one or two provisions use: "hand-written if/else rules" ->
"based on the rules defined solely by natural persons to automatically execute operations" (Recital
12), "can one guard act on a match?" -> "separately verified and confirmed by at least two natural
persons" (Art. 14(5)). The ranking reads those words as a few more query terms among many, and the
provision that states them can rank far down. When a question uses such a phrase and only one
provision states its law's words, that provision is moved up to STATING_PLACE if the ranking left it
lower. Placed right after the best provision, it took the lead from the one that answered
("summary of the results of the most recent bias audit" is § 20-871(a)'s words, but § 5-303 says
where and how to post it).
"""
from __future__ import annotations

import re
from collections.abc import Sequence

from core.types import Chunk, ScoredChunk, with_scores_of_places

# Law's words more provisions state point to none in particular (two copies of one provision count once).
RARE_IN_CHUNKS = 1
# Where a stating provision the ranking left further down is moved to: inside what the contexts
# hold, below the first few the answer is usually taken from, so the lead is chosen as before.
STATING_PLACE = 5


def folded(text: str) -> str:
    """Lower case, every run of white space one space: how law's words are found in a chunk."""
    return re.sub(r"\s+", " ", text.lower())


def stating(law_words: Sequence[str], chunks: Sequence[Chunk], texts: Sequence[str]) -> list[Chunk]:
    """The chunks (of `chunks`, whose folded texts are `texts`) stating any of `law_words`, for the law's
    words no more than RARE_IN_CHUNKS provisions state."""
    found: list[Chunk] = []
    for words in law_words:
        needle = folded(words)
        hits = [chunk for chunk, text in zip(chunks, texts) if needle in text]
        if len({chunk.label for chunk in hits}) <= RARE_IN_CHUNKS:  # two copies of one provision count once
            found += [chunk for chunk in hits if chunk not in found]
    return found


def with_stating(ranked: Sequence[ScoredChunk], stated: Sequence[Chunk]) -> list[ScoredChunk]:
    """`ranked` with each chunk of `stated` the ranking left below place STATING_PLACE moved up to
    that place (those it ranked, in its order, then the others); one it ranked higher stays where it
    is, and so does the order of everything else. Scores stay those of the places."""
    ids = {chunk.id for chunk in stated} - {sc.chunk.id for sc in ranked[:STATING_PLACE]}
    if not ranked or not ids:
        return list(ranked)
    ranked_ids = {sc.chunk.id for sc in ranked}
    moved = [sc for sc in ranked[STATING_PLACE:] if sc.chunk.id in ids]
    moved += [ScoredChunk(chunk, 0.0) for chunk in stated if chunk.id in ids and chunk.id not in ranked_ids]
    order = [*ranked[:STATING_PLACE], *moved, *(sc for sc in ranked[STATING_PLACE:] if sc.chunk.id not in ids)]
    return with_scores_of_places(order, ranked)
