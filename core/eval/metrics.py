"""Evaluation metrics: pure functions, no I/O, no model loading (embeddings come in as a callable).

The metrics are deliberately independent of the answer pipeline's own text utilities
(``core/text.py``): changing how the system tokenises must not change how it is scored.

Content words (used by every word-overlap metric)
--------------------------------------------------
:func:`content_words` turns a text into a list of terms by, in order:

1. Unicode-lowercasing the text (``str.lower``).
2. Extracting tokens with the regular expression ``\\d+(?:[.-]\\d+)+|[^\\W_]+``: a run of digits
   joined by ``-`` or ``.`` is kept whole (section numbers ``20-870``, ``5-301``; decimals
   ``0.979``), otherwise a token is a maximal run of Unicode letters/digits. Everything else
   (spaces, punctuation, ``§``, ``%``, apostrophes, hyphens between words, parentheses) separates
   tokens, so ``§ 20-871(b)(3)`` gives ``20-871``, ``b``, ``3`` and ``decision-making`` gives
   ``decision``, ``making``.
3. Dropping English stopwords (:data:`STOPWORDS`, the 179-word NLTK English list) and every
   single-letter alphabetic token (list markers such as the ``b`` of ``(b)``, possessive ``s``).
   Single digits are kept.
4. Stemming every remaining token that contains a letter with the Snowball English (Porter2)
   stemmer (PyStemmer, ``Stemmer.Stemmer("english")``); tokens made only of digits, ``-`` and
   ``.`` are left unchanged.

Overlap metrics compare *sets* of distinct content words (a repeated word counts once).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

_TOKEN = re.compile(r"\d+(?:[.-]\d+)+|[^\W_]+")
_NUMERIC = re.compile(r"^[\d.-]+$")
_WS = re.compile(r"\s+")

# NLTK English stopword list (179 words), fixed here so scores never depend on a download.
STOPWORDS: frozenset[str] = frozenset(
    """i me my myself we our ours ourselves you you're you've you'll you'd your yours yourself
    yourselves he him his himself she she's her hers herself it it's its itself they them their
    theirs themselves what which who whom this that that'll these those am is are was were be been
    being have has had having do does did doing a an the and but if or because as until while of at
    by for with about against between into through during before after above below to from up down
    in out on off over under again further then once here there when where why how all any both each
    few more most other some such no nor not only own same so than too very s t can will just don
    don't should should've now d ll m o re ve y ain aren aren't couldn couldn't didn didn't doesn
    doesn't hadn hadn't hasn hasn't haven haven't isn isn't ma mightn mightn't mustn mustn't needn
    needn't shan shan't shouldn shouldn't wasn wasn't weren weren't won won't wouldn wouldn't""".split()
)


@lru_cache(maxsize=1)
def _stemmer():
    import Stemmer  # PyStemmer

    return Stemmer.Stemmer("english")


@lru_cache(maxsize=200_000)
def _stem(token: str) -> str:
    if _NUMERIC.match(token):
        return token
    return _stemmer().stemWord(token)


def content_words(text: str) -> list[str]:
    """Content words of `text`, in order, duplicates kept (see the module docstring for the rules)."""
    out = []
    for tok in _TOKEN.findall(text.lower()):
        if tok in STOPWORDS or (len(tok) == 1 and not tok.isdigit()):
            continue
        out.append(_stem(tok))
    return out


def content_word_set(text: str) -> set[str]:
    """The distinct content words of `text`."""
    return set(content_words(text))


def context_recall(reference_answer: str, contexts_texts: Iterable[str]) -> float | None:
    """Share of the reference answer's content covered by the retrieved contexts.

    ``|R ∩ C| / |R|`` where ``R`` is the set of distinct content words of `reference_answer` and
    ``C`` the union of the content-word sets of all `contexts_texts`. In ``[0, 1]``; ``None`` when
    the reference has no content words (the question is then left out of the mean). No contexts
    gives ``0.0``.
    """
    ref = content_word_set(reference_answer)
    if not ref:
        return None
    ctx: set[str] = set()
    for t in contexts_texts:
        ctx |= content_word_set(t)
    return len(ref & ctx) / len(ref)


@dataclass(frozen=True)
class WordScores:
    recall: float  # |A ∩ R| / |R|
    precision: float  # |A ∩ R| / |A|  (0 when the answer has no content words)
    f1: float  # harmonic mean of recall and precision (0 when both are 0)


def word_recall_f1(answer: str, reference: str) -> WordScores | None:
    """Reference-word recall, precision and F1 of `answer` against `reference`, over distinct content words.

    With ``A`` and ``R`` the sets of distinct content words of the answer and the reference:
    ``recall = |A ∩ R| / |R|``, ``precision = |A ∩ R| / |A|`` (0 if ``A`` is empty) and
    ``f1 = 2·P·R / (P + R)`` (0 if ``P + R = 0``). Returns ``None`` when ``R`` is empty.
    """
    ref = content_word_set(reference)
    if not ref:
        return None
    ans = content_word_set(answer)
    common = len(ans & ref)
    recall = common / len(ref)
    precision = common / len(ans) if ans else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return WordScores(recall=recall, precision=precision, f1=f1)


def answer_similarity(
    answers: Sequence[str], references: Sequence[str], embed: Callable[[list[str]], Any]
) -> list[float]:
    """Cosine similarity between each answer and its reference, pairwise (``answers[i]`` vs ``references[i]``).

    `embed` maps a list of strings to an ``(n, d)`` array (the project uses all-MiniLM-L6-v2); it is
    called once with ``list(answers) + list(references)``. Vectors are L2-normalised here, so the
    embedder need not normalise. A zero vector gives similarity ``0.0``. Values are in ``[-1, 1]``.
    """
    if len(answers) != len(references):
        raise ValueError(f"{len(answers)} answers but {len(references)} references")
    if not answers:
        return []
    vecs = np.asarray(embed(list(answers) + list(references)), dtype=np.float64)
    if vecs.ndim != 2 or vecs.shape[0] != 2 * len(answers):
        raise ValueError(f"embed returned shape {vecs.shape}, expected ({2 * len(answers)}, d)")
    norms = np.linalg.norm(vecs, axis=1, keepdims=True)
    vecs = np.divide(vecs, norms, out=np.zeros_like(vecs), where=norms > 0)
    a, r = vecs[: len(answers)], vecs[len(answers) :]
    return [float(x) for x in np.clip(np.sum(a * r, axis=1), -1.0, 1.0)]


def normalize_ws(text: str) -> str:
    """Collapse every run of whitespace (any Unicode whitespace, incl. newlines) to one space and strip."""
    return _WS.sub(" ", text).strip()


def _get(obj: Any, key: str) -> Any:
    return obj.get(key) if isinstance(obj, Mapping) else getattr(obj, key, None)


def citation_valid(citation: Any, contexts: Iterable[Any]) -> bool:
    """True iff the citation's quote appears verbatim in the text of a context with the same chunk id.

    `citation` has ``chunk_id`` and ``quote``; each context has ``chunk_id`` and ``text`` (dicts as in
    a result record, or objects with those attributes). "Verbatim" means an exact, case-sensitive
    substring after one normalisation only: runs of whitespace are collapsed to a single space and
    both ends stripped, in quote and text alike (:func:`normalize_ws`), because PDF line breaks are
    not meaningful. Nothing else is forgiven: punctuation, quote marks, case and ellipses must match.
    An empty (or all-whitespace) quote, or a chunk id not among the contexts, is invalid.
    """
    quote = normalize_ws(_get(citation, "quote") or "")
    chunk_id = _get(citation, "chunk_id")
    if not quote or chunk_id is None:
        return False
    return any(
        _get(c, "chunk_id") == chunk_id and quote in normalize_ws(_get(c, "text") or "") for c in contexts
    )


def percentile(values: Iterable[float], q: float) -> float | None:
    """The `q`-th percentile (0 ≤ q ≤ 100) with linear interpolation between closest ranks.

    Same definition as ``numpy.percentile(values, q)`` (method "linear"): sort the n values, take
    the fractional rank ``h = (n - 1)·q/100`` and interpolate between ``x[floor(h)]`` and
    ``x[ceil(h)]``. ``None`` for no values; NaNs are ignored.
    """
    if not 0 <= q <= 100:
        raise ValueError(f"percentile q must be in [0, 100], got {q}")
    xs = sorted(float(v) for v in values if v is not None and not math.isnan(float(v)))
    if not xs:
        return None
    h = (len(xs) - 1) * q / 100.0
    lo, hi = math.floor(h), math.ceil(h)
    return xs[lo] + (xs[hi] - xs[lo]) * (h - lo)


def mean(values: Iterable[float | None]) -> float | None:
    """Arithmetic mean of the non-None values; None if there are none."""
    xs = [float(v) for v in values if v is not None]
    return sum(xs) / len(xs) if xs else None
