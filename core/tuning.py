"""Pairs of texts that should embed close together, for tuning the embedding model on a collection.

MiniLM, trained on general web text, does not see "CV screening" as close to "recruitment or
selection of natural persons … to analyse and filter job applications", or "auto-grading essays" as
close to "evaluate learning outcomes"; an unrelated recital often scores higher. The law itself says
which of its texts belong together, so the model can be tuned on that (storage/embedder_tuning.py):

* a provision's heading and each of its sentences ("Penalties" ↔ "… fines of up to EUR 35 000 000");
* a list's lead-in and its first item ("… shall not be used for:" ↔ "(a) the recruitment …");
* where questions with verbatim evidence exist (our own training questions), each question and its
  evidence span: the users' words and the law's.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence

from core.segments import chunk_segments
from core.types import Chunk

# Sentences shorter than this say too little to pair ("(a)", "Article 5").
MIN_PAIR_WORDS = 6
# A long provision's heading is paired with its first sentences only, so the longest do not dominate.
SENTENCES_PER_HEADING = 4


def tuning_pairs(
    chunks: Iterable[Chunk], questions: Iterable[tuple[str, Sequence[str]]] = ()
) -> list[tuple[str, str]]:
    """(anchor, positive) pairs from the chunks' own structure and from (question, evidence spans)."""
    pairs: list[tuple[str, str]] = []
    for chunk in chunks:
        sentences = [s for s in chunk_segments(chunk) if len(s.split()) >= MIN_PAIR_WORDS]
        if chunk.heading:
            pairs.extend((chunk.heading, s) for s in sentences[:SENTENCES_PER_HEADING])
        pairs.extend((lead, item) for lead, item in zip(sentences, sentences[1:]) if lead.rstrip().endswith(":"))
    for question, evidence in questions:
        pairs.extend((question, span) for span in evidence if span.strip())
    return list(dict.fromkeys(pairs))
