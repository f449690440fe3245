"""Precedents: questions whose answering provisions are known, used to rank provisions for new ones.

Users of one law ask about the same few dozen rules in ever new words ("can our people-analytics
team run the audit?", "could our HR analytics folks do the bias audit themselves?"). A question
whose answering provisions someone has already settled (our own written questions with their
evidence, or an exchange a reviewer corrected or confirmed: `hypa feedback export --reviewed`) is a
precedent: when a new question means nearly the same, the provisions that answered it are likely to
answer this one too. The learned ranking (core/ranking.py) reads words and meaning of one question
against one provision; a precedent carries what people have already judged.

`Precedents.votes` gives every chunk of a collection the summed similarity of the nearest
precedents (at most `neighbours`, each at least `min_similarity` close to the question) that it
answered; the pipeline adds `weight` times that to the ranking score. Only close paraphrases vote,
so a question unlike any precedent is ranked exactly as without them.

A precedent the law does not answer (a rule users expect that the law does not have: "liability
insurance for providers", "an auditor's licence") is one the offline answer declines
(`Precedents.declined`): when the question's nearest precedent is such a one, at least
`min_decline_similarity` close, quoting the nearest provision would read as an answer to it.

A precedent file is JSON Lines, one question a line, in the eval dataset's format:
``{"question": ..., "evidence": [verbatim spans]}`` or ``{"question": ..., "gold_provisions":
[citation labels]}`` (what `hypa feedback export --reviewed` writes), or ``{"question": ...,
"answerable": false}`` for a question the law does not answer (a refusal a reviewer confirmed is
one too: `"refused": true, "review_state": "fine"` in the export). A row's `collection`, when it has
one, says which collection it is a precedent for (an export of reviewed exchanges holds every
collection's). Rows of a conversation (`conversation_history` not empty) are skipped: their words
alone do not say what they ask; so are rows whose evidence and provisions are both empty (a reviewed
exchange that names no provision).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from core.errors import PrecedentError
from core.eval.user_style import fold  # evidence is matched as the scorer matches it
from core.types import Chunk


@dataclass(frozen=True)
class Precedent:
    question: str
    evidence: tuple[str, ...] = ()  # verbatim spans of the provisions that answer it
    provisions: tuple[str, ...] = ()  # or their citation labels
    collection: str = ""  # the row's own "collection", when it names one
    answerable: bool = True  # False: the law does not answer it (no provisions)


@dataclass(frozen=True)
class PrecedentConfig:
    # Chosen on questions the precedents do not hold (docs/RESULTS.md, tenth update): close
    # paraphrases only; lower thresholds let questions about a neighbouring rule vote as well.
    weight: float = 2.0
    neighbours: int = 10
    min_similarity: float = 0.7
    # ... and the nearest precedent, unanswered by the law, this close: declined offline. In the sets
    # it was chosen on no answerable question had an unanswerable one this close as its nearest.
    min_decline_similarity: float = 0.75


def read_precedents(path: Path) -> list[Precedent]:
    """The precedents of a JSON Lines file (see the module docstring)."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise PrecedentError(f"cannot read precedents {path}: {exc}") from exc
    out: list[Precedent] = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise PrecedentError(f"{path}:{number}: not JSON ({exc.msg})") from exc
        if not isinstance(row, dict) or not isinstance(row.get("question"), str) or not row["question"].strip():
            raise PrecedentError(f"{path}:{number}: a precedent needs a \"question\" (text)")
        if row.get("conversation_history"):
            continue
        collection = row["collection"] if isinstance(row.get("collection"), str) else ""
        # a question the law does not answer: said so, or a refusal a reviewer confirmed (an export
        # of reviewed exchanges: review_state "fine", refused true)
        if row.get("answerable") is False or (row.get("refused") is True and row.get("review_state") == "fine"):
            out.append(Precedent(row["question"].strip(), collection=collection, answerable=False))
            continue
        if "evidence" not in row and "gold_provisions" not in row:
            raise PrecedentError(f"{path}:{number}: a precedent needs \"evidence\" spans or \"gold_provisions\" labels")
        evidence = _strings(row.get("evidence"), path, number, "evidence")
        provisions = _strings(row.get("gold_provisions"), path, number, "gold_provisions")
        if not evidence and not provisions:  # e.g. a reviewed exchange with no provision: nothing to vote for
            continue
        out.append(Precedent(row["question"].strip(), evidence, provisions, collection))
    return out


def _strings(value: object, path: Path, number: int, name: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise PrecedentError(f"{path}:{number}: \"{name}\" must be a list of texts")
    return tuple(v for v in value if v.strip())


class Precedents:
    """A collection's precedents, each tied to the chunks that answer it."""

    def __init__(
        self,
        chunks: Sequence[Chunk],
        precedents: Sequence[Precedent],
        embed_queries: Callable[[list[str]], np.ndarray],
        config: PrecedentConfig = PrecedentConfig(),
    ) -> None:
        """`embed_queries`: embeds questions as the pipeline embeds a new one (L2-normalised rows)."""
        self.config = config
        folded = [fold(c.text) for c in chunks]
        by_label: dict[str, list[int]] = {}
        for i, chunk in enumerate(chunks):
            by_label.setdefault(chunk.label, []).append(i)
        self.labels = [c.label for c in chunks]
        self.questions: list[str] = []
        self._answered_by: list[np.ndarray] = []
        self.unanswered = [p.question for p in precedents if not p.answerable]
        for p in precedents:
            if not p.answerable:
                continue
            rows = {i for span in map(fold, p.evidence) if span for i, text in enumerate(folded) if span in text}
            rows |= {i for label in p.provisions for i in by_label.get(label, ())}
            if rows:  # a precedent whose provisions this collection does not hold says nothing here
                self.questions.append(p.question)
                self._answered_by.append(np.array(sorted(rows), dtype=np.int64))
        self.size = len(chunks)
        self.unresolved = len(precedents) - len(self.questions) - len(self.unanswered)
        asked = self.questions + self.unanswered
        vectors = np.asarray(embed_queries(asked), dtype=np.float32) if asked else np.zeros((0, 0), dtype=np.float32)
        self._vectors, self._unanswered_vectors = vectors[: len(self.questions)], vectors[len(self.questions) :]

    def __len__(self) -> int:
        return len(self._answered_by)

    def nearest(self, query_vector: np.ndarray, count: int) -> list[Neighbour]:
        """The `count` precedents closest in meaning to the question, closest first."""
        if not len(self):
            return []
        similarity = self._vectors @ np.asarray(query_vector, dtype=np.float32)
        order = np.argsort(-similarity, kind="stable")[:count]
        return [
            Neighbour(self.questions[j], float(similarity[j]), tuple(int(i) for i in self._answered_by[j])) for j in order
        ]

    def declined(self, query_vector: np.ndarray) -> tuple[str, float] | None:
        """The precedent the law does not answer that the question is nearest to, with its
        similarity, when it is nearer than every answered one and at least min_decline_similarity."""
        if not len(self.unanswered):
            return None
        query = np.asarray(query_vector, dtype=np.float32)
        similarity = self._unanswered_vectors @ query
        j = int(np.argmax(similarity))
        best = float(similarity[j])
        answered = float((self._vectors @ query).max()) if len(self) else -1.0
        if best < self.config.min_decline_similarity or best <= answered:
            return None
        return self.unanswered[j], best

    def votes(self, query_vector: np.ndarray) -> np.ndarray:
        """Per chunk: the similarity of each of the nearest precedents it answered, shared among the
        chunks that answered that precedent, summed. Zero everywhere when no precedent is close."""
        out = np.zeros(self.size, dtype=np.float32)
        for neighbour in self.nearest(query_vector, self.config.neighbours):
            if neighbour.similarity < self.config.min_similarity:
                break
            out[list(neighbour.rows)] += neighbour.similarity / len(neighbour.rows)
        return out


@dataclass(frozen=True)
class Neighbour:
    question: str
    similarity: float
    rows: tuple[int, ...]  # the chunks (rows of the collection) that answered it
