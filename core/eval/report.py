"""`hypa eval report`: score a results file (from `hypa eval run`) against the gold dataset.

Which rows each score uses (exact definitions of the metrics are in ``core/eval/metrics.py``):

* **Scope.** A row is *out of scope* when its gold ``metadata.question_type`` is ``"out of scope"``,
  unless the scope review file lists its id, in which case the review's ``in_scope`` wins. Rows the
  review marks ``borderline`` are in neither scope class: they are left out of both refusal rates and
  reported on their own.
* **Answer-quality scores** (context recall, answer similarity, reference-word recall and F1) use
  *reference rows*: rows in scope after review, not borderline, whose gold reference is a real answer
  (gold type is not ``"out of scope"``: the reference of a relabelled row is the generator's
  "cannot be answered" text, which is not a usable reference), and without an error. Refused
  answers are scored like any other answer (so refusing an answerable question is penalised).
* **Refusal rates**: share of rows with ``refused == true`` among error-free rows of that scope class.
* **Citation validity**: valid citations / all citations, over error-free rows (a row with no
  citations contributes nothing).
* **Context tokens**: mean of ``usage.context_tokens`` over error-free rows.
* **Latency**: p50/p95 of ``timings_ms.total`` and p50 of every other ``timings_ms`` key (stage),
  over error-free rows.
* Rows with an ``error`` field are counted in ``errors`` and excluded from every other score.
  Gold ids absent from the results are listed as ``missing``; result ids absent from gold as ``unknown``.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from core.errors import DatasetError
from core.eval.metrics import (
    answer_similarity,
    citation_valid,
    context_recall,
    mean,
    percentile,
    word_recall_f1,
)

OUT_OF_SCOPE_TYPE = "out of scope"
DEFAULT_SCOPE_REVIEW = Path(__file__).with_name("ll144_dev_scope_review.toml")
# Display order of the dev set's question types; unknown types follow alphabetically.
TYPE_ORDER = (
    "simple",
    "complex",
    "distracting element",
    "situational",
    "double",
    "conversational",
    "complex_situational",
    "vague",
    "compare",
    "rule_conclusion",
    "out of scope",
)

Embed = Callable[[list[str]], Any]


# ----------------------------------------------------------------------------------------- inputs
@dataclass(frozen=True)
class GoldRow:
    id: str
    question_type: str
    reference_answer: str


@dataclass(frozen=True)
class ScopeVerdict:
    id: str
    in_scope: bool
    borderline: bool = False
    provision: str = ""
    note: str = ""


def read_jsonl(path: Path, what: str) -> list[tuple[int, dict]]:
    """(line number, row) of a JSONL file of objects with an 'id'; DatasetError names path:line."""
    rows = []
    with path.open(encoding="utf-8") as f:
        for lineno, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise DatasetError(
                    f"{path}:{lineno}: invalid JSON in {what} ({e.msg} at column {e.colno})"
                ) from None
            if not isinstance(row, dict) or "id" not in row:
                raise DatasetError(f"{path}:{lineno}: {what} row must be a JSON object with an 'id'")
            rows.append((lineno, row))
    return rows


def read_gold(path: str | Path) -> dict[str, GoldRow]:
    """Gold rows by id (as a string).

    Keeps the question type (``metadata.question_type``, else ``"unknown"``) and the reference answer.
    """
    gold: dict[str, GoldRow] = {}
    for _, row in read_jsonl(Path(path), "gold dataset"):
        meta = row.get("metadata") or {}
        qtype = meta.get("question_type") if isinstance(meta, dict) else None
        gold[str(row["id"])] = GoldRow(
            id=str(row["id"]),
            question_type=str(qtype or "unknown"),
            reference_answer=str(row.get("reference_answer") or ""),
        )
    return gold


def read_results(path: str | Path) -> list[dict]:
    """The rows of a results file written by `run_eval` (a clear error names a bad line)."""
    return [row for _, row in read_jsonl(Path(path), "results file")]


def load_scope_review(path: str | Path) -> dict[str, ScopeVerdict]:
    """Parse a scope review TOML file (``[[review]]`` tables; see ll144_dev_scope_review.toml)."""
    p = Path(path)
    try:
        data = tomllib.loads(p.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as e:
        raise DatasetError(f"{p}: invalid TOML ({e})") from None
    allowed = {"id", "in_scope", "borderline", "provision", "note"}
    out: dict[str, ScopeVerdict] = {}
    for i, entry in enumerate(data.get("review", [])):
        where = f"{p}: review #{i + 1}"
        extra = set(entry) - allowed
        if extra:
            raise DatasetError(f"{where}: unknown keys {sorted(extra)}")
        if not isinstance(entry.get("id"), str) or not isinstance(entry.get("in_scope"), bool):
            raise DatasetError(f"{where}: needs a string 'id' and a boolean 'in_scope'")
        if entry["in_scope"] and not entry.get("borderline") and not entry.get("provision"):
            raise DatasetError(f"{where}: in_scope = true needs a 'provision'")
        if entry["id"] in out:
            raise DatasetError(f"{where}: duplicate id {entry['id']}")
        out[entry["id"]] = ScopeVerdict(
            id=entry["id"],
            in_scope=entry["in_scope"],
            borderline=bool(entry.get("borderline", False)),
            provision=str(entry.get("provision", "")),
            note=str(entry.get("note", "")),
        )
    return out


# ----------------------------------------------------------------------------------------- report
@dataclass
class GroupStats:
    """Scores over one group of rows (all rows, or one question type)."""

    name: str
    n: int = 0  # result rows in the group (incl. errors)
    errors: int = 0
    refused: int = 0  # among error-free rows
    refusal_rate: float | None = None
    n_reference: int = 0  # rows used for answer-quality scores
    context_recall: float | None = None
    answer_similarity: float | None = None
    word_recall: float | None = None
    word_f1: float | None = None
    citations: int = 0
    citations_valid: int = 0
    citation_validity: float | None = None
    context_tokens: float | None = None
    latency_p50_ms: float | None = None
    latency_p95_ms: float | None = None
    stage_p50_ms: dict[str, float | None] = field(default_factory=dict)


@dataclass
class ScopeClass:
    n: int = 0  # error-free rows
    refused: int = 0

    @property
    def refusal_rate(self) -> float | None:
        return self.refused / self.n if self.n else None


@dataclass
class Report:
    results_path: str
    gold_path: str
    scope_review_path: str | None
    overall: GroupStats
    by_type: list[GroupStats]
    out_of_scope: ScopeClass
    in_scope: ScopeClass
    borderline: ScopeClass
    relabelled: list[dict]  # [{id, gold_in_scope, in_scope, borderline, provision, type}]
    stages: list[str]
    missing_ids: list[str]
    unknown_ids: list[str]
    similarity_computed: bool
    llm: "LLMSummary | None" = None

    @property
    def errors(self) -> int:
        return self.overall.errors

    def to_dict(self) -> dict:
        d = asdict(self)
        for k in ("out_of_scope", "in_scope", "borderline"):
            d[k]["refusal_rate"] = getattr(self, k).refusal_rate
        return d


@dataclass
class LLMSummary:
    """LLM tokens per question (rows answered by a model) and what 1,000 such questions cost."""

    rows: int
    models: dict[str, int]
    input_tokens: float
    output_tokens: float
    cache_read_input_tokens: float
    cache_creation_input_tokens: float
    cost_per_1000_usd: float | None  # None when a model has no price in core/llm/cost.py


def summarize_llm_usage(rows: Sequence[dict]) -> LLMSummary | None:
    """None when no row spent LLM tokens (e.g. the extractive default)."""
    from core.errors import UnknownModelPrice
    from core.llm.cost import estimate_cost

    used = [r for r in rows if "error" not in r and any((r.get("usage") or {}).get(k) for k in _LLM_TOKEN_FIELDS)]
    if not used:
        return None
    models: dict[str, int] = {}
    total_cost: float | None = 0.0
    for r in used:
        model = str(r.get("model") or "")
        models[model] = models.get(model, 0) + 1
        try:
            total_cost = None if total_cost is None else total_cost + estimate_cost(r["usage"], model)
        except UnknownModelPrice:
            total_cost = None
    mean = {k: sum(float(r["usage"].get(k) or 0) for r in used) / len(used) for k in _LLM_TOKEN_FIELDS}
    return LLMSummary(
        rows=len(used),
        models=models,
        input_tokens=mean["input_tokens"],
        output_tokens=mean["output_tokens"],
        cache_read_input_tokens=mean["cache_read_input_tokens"],
        cache_creation_input_tokens=mean["cache_creation_input_tokens"],
        cost_per_1000_usd=None if total_cost is None else 1000 * total_cost / len(used),
    )


_LLM_TOKEN_FIELDS = ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")


@dataclass
class _Scored:
    """Per-row values, computed once and aggregated per group."""

    qtype: str
    error: bool
    refused: bool = False
    reference: bool = False
    context_recall: float | None = None
    similarity: float | None = None
    word_recall: float | None = None
    word_f1: float | None = None
    citations: int = 0
    citations_valid: int = 0
    context_tokens: float | None = None
    timings: dict[str, float] = field(default_factory=dict)


def _aggregate(name: str, rows: Sequence[_Scored], stages: Sequence[str]) -> GroupStats:
    ok = [r for r in rows if not r.error]
    ref = [r for r in ok if r.reference]
    cites = sum(r.citations for r in ok)
    valid = sum(r.citations_valid for r in ok)
    totals = [r.timings["total"] for r in ok if "total" in r.timings]
    return GroupStats(
        name=name,
        n=len(rows),
        errors=len(rows) - len(ok),
        refused=sum(r.refused for r in ok),
        refusal_rate=(sum(r.refused for r in ok) / len(ok)) if ok else None,
        n_reference=len(ref),
        context_recall=mean(r.context_recall for r in ref),
        answer_similarity=mean(r.similarity for r in ref),
        word_recall=mean(r.word_recall for r in ref),
        word_f1=mean(r.word_f1 for r in ref),
        citations=cites,
        citations_valid=valid,
        citation_validity=(valid / cites) if cites else None,
        context_tokens=mean(r.context_tokens for r in ok),
        latency_p50_ms=percentile(totals, 50),
        latency_p95_ms=percentile(totals, 95),
        stage_p50_ms={s: percentile([r.timings[s] for r in ok if s in r.timings], 50) for s in stages},
    )


def _type_key(t: str) -> tuple[int, str]:
    return (TYPE_ORDER.index(t), "") if t in TYPE_ORDER else (len(TYPE_ORDER), t)


def build_report(
    results_path: str | Path,
    gold_path: str | Path,
    scope_review_path: str | Path | None,
    embed: Embed | None,
) -> Report:
    """Score `results_path` against `gold_path` (see the module docstring for every rule).

    `scope_review_path` may be None (no corrections). `embed` (``list[str] -> (n, d) array``) is used
    for answer similarity; pass None to skip it (the score is then reported as n/a).
    """
    gold = read_gold(gold_path)
    results = read_results(results_path)
    review = load_scope_review(scope_review_path) if scope_review_path else {}

    scored: list[_Scored] = []
    sim_pairs: list[tuple[_Scored, str, str]] = []
    stages: list[str] = []
    seen: set[str] = set()
    unknown: list[str] = []
    out_cls, in_cls, border_cls = ScopeClass(), ScopeClass(), ScopeClass()
    for row in results:
        rid = str(row["id"])
        g = gold.get(rid)
        if g is None:
            unknown.append(rid)
            continue
        if rid in seen:
            raise DatasetError(f"{results_path}: id {rid} appears more than once")
        seen.add(rid)
        gold_in_scope = g.question_type != OUT_OF_SCOPE_TYPE
        verdict = review.get(rid)
        in_scope = verdict.in_scope if verdict else gold_in_scope
        borderline = bool(verdict and verdict.borderline)
        if "error" in row:
            scored.append(_Scored(qtype=g.question_type, error=True))
            continue
        s = _Scored(qtype=g.question_type, error=False, refused=bool(row.get("refused")))
        contexts = row.get("contexts") or []
        cits = row.get("citations") or []
        s.citations = len(cits)
        s.citations_valid = sum(citation_valid(c, contexts) for c in cits)
        usage = row.get("usage") or {}
        if usage.get("context_tokens") is not None:
            s.context_tokens = float(usage["context_tokens"])
        s.timings = {k: float(v) for k, v in (row.get("timings_ms") or {}).items()}
        for k in s.timings:
            if k != "total" and k not in stages:
                stages.append(k)
        cls = border_cls if borderline else (in_cls if in_scope else out_cls)
        cls.n += 1
        cls.refused += s.refused
        if in_scope and not borderline and gold_in_scope and g.reference_answer.strip():
            s.reference = True
            answer = str(row.get("answer") or "")
            s.context_recall = context_recall(
                g.reference_answer, [str(c.get("text") or "") for c in contexts]
            )
            w = word_recall_f1(answer, g.reference_answer)
            if w is not None:
                s.word_recall, s.word_f1 = w.recall, w.f1
            sim_pairs.append((s, answer, g.reference_answer))
        scored.append(s)

    if embed is not None and sim_pairs:
        sims = answer_similarity([a for _, a, _ in sim_pairs], [r for _, _, r in sim_pairs], embed)
        for (s, _, _), v in zip(sim_pairs, sims, strict=True):
            s.similarity = v

    relabelled = []
    for rid, verdict in review.items():
        g = gold.get(rid)
        if g is None:
            continue
        gold_in = g.question_type != OUT_OF_SCOPE_TYPE
        if verdict.in_scope != gold_in or verdict.borderline:
            relabelled.append(
                {
                    "id": rid,
                    "type": g.question_type,
                    "gold_in_scope": gold_in,
                    "in_scope": verdict.in_scope,
                    "borderline": verdict.borderline,
                    "provision": verdict.provision,
                }
            )

    types = sorted({s.qtype for s in scored}, key=_type_key)
    return Report(
        results_path=str(results_path),
        gold_path=str(gold_path),
        scope_review_path=str(scope_review_path) if scope_review_path else None,
        overall=_aggregate("all", scored, stages),
        by_type=[_aggregate(t, [s for s in scored if s.qtype == t], stages) for t in types],
        out_of_scope=out_cls,
        in_scope=in_cls,
        borderline=border_cls,
        relabelled=relabelled,
        stages=stages,
        missing_ids=[i for i in gold if i not in seen],
        unknown_ids=unknown,
        similarity_computed=embed is not None,
        llm=summarize_llm_usage(results),
    )


# -------------------------------------------------------------------------------------- rendering
def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def _f3(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.3f}"


def _ms(x: float | None) -> str:
    return "n/a" if x is None else (f"{x:.0f}" if x >= 100 else f"{x:.1f}")


def _num(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.0f}"


_COLUMNS = (
    "type",
    "n",
    "err",
    "refused",
    "ctx recall",
    "ans sim",
    "word R",
    "word F1",
    "cit. valid",
    "cites",
    "ctx tok",
    "p50 ms",
    "p95 ms",
)


def _group_cells(g: GroupStats) -> list[str]:
    return [
        g.name,
        str(g.n),
        str(g.errors),
        _pct(g.refusal_rate),
        _f3(g.context_recall),
        _f3(g.answer_similarity),
        _f3(g.word_recall),
        _f3(g.word_f1),
        _pct(g.citation_validity),
        str(g.citations),
        _num(g.context_tokens),
        _ms(g.latency_p50_ms),
        _ms(g.latency_p95_ms),
    ]


def _scope_rows(r: Report) -> list[list[str]]:
    return [
        [
            "out of scope (reviewed)",
            str(r.out_of_scope.n),
            str(r.out_of_scope.refused),
            _pct(r.out_of_scope.refusal_rate),
        ],
        ["in scope (reviewed)", str(r.in_scope.n), str(r.in_scope.refused), _pct(r.in_scope.refusal_rate)],
        [
            "borderline (excluded above)",
            str(r.borderline.n),
            str(r.borderline.refused),
            _pct(r.borderline.refusal_rate),
        ],
    ]


def _notes(r: Report) -> list[str]:
    notes = [
        f"answer-quality scores over {r.overall.n_reference} rows with a gold reference answer "
        f"(in scope, not relabelled); refusal rates over error-free rows",
    ]
    if not r.similarity_computed:
        notes.append("answer similarity not computed (no embedder)")
    if r.scope_review_path:
        flips = sum(1 for x in r.relabelled if not x["borderline"])
        border = sum(1 for x in r.relabelled if x["borderline"])
        notes.append(
            f"scope review {Path(r.scope_review_path).name}: {flips} relabelled, {border} borderline"
        )
    else:
        notes.append("no scope review: scope taken from gold question_type only")
    if r.llm is None:
        notes.append("no LLM tokens spent (extractive answers): $0 per 1,000 questions")
    else:
        cost = "unknown (a model has no price)" if r.llm.cost_per_1000_usd is None else f"${r.llm.cost_per_1000_usd:,.2f}"
        models = ", ".join(f"{m} ({n})" for m, n in sorted(r.llm.models.items()))
        notes.append(
            f"LLM tokens per question over {r.llm.rows} rows ({models}): input {r.llm.input_tokens:,.0f}, "
            f"output {r.llm.output_tokens:,.0f}, cache read {r.llm.cache_read_input_tokens:,.0f}, "
            f"cache write {r.llm.cache_creation_input_tokens:,.0f}; estimated cost per 1,000 questions {cost}"
        )
    if r.errors:
        notes.append(f"{r.errors} rows failed (error) and are excluded from all scores")
    if r.missing_ids:
        notes.append(f"{len(r.missing_ids)} gold ids have no result row")
    if r.unknown_ids:
        notes.append(f"{len(r.unknown_ids)} result ids are not in the gold set (ignored)")
    return notes


def render_markdown(report: Report) -> str:
    """The report as GitHub-flavoured markdown tables (paste into docs/RESULTS.md)."""

    def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
        out = ["| " + " | ".join(header) + " |", "|" + "|".join(" --- " for _ in header) + "|"]
        out += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in rows]
        return out

    lines = [f"Results: `{Path(report.results_path).name}`, gold: `{Path(report.gold_path).name}`", ""]
    lines += table(_COLUMNS, [_group_cells(report.overall)] + [_group_cells(g) for g in report.by_type])
    lines += ["", "Refusals by scope:", ""]
    lines += table(("scope", "n", "refused", "refusal rate"), _scope_rows(report))
    if report.stages:
        lines += ["", "Stage latency p50 (ms):", ""]
        lines += table(
            ["type", *report.stages],
            [
                [g.name, *(_ms(g.stage_p50_ms.get(s)) for s in report.stages)]
                for g in [report.overall, *report.by_type]
            ],
        )
    lines += [""] + [f"- {n}" for n in _notes(report)]
    return "\n".join(lines) + "\n"


def render_rich(report: Report, console: Any = None) -> None:
    """Print the report as rich tables (to `console`, default a new stdout Console)."""
    from rich.console import Console
    from rich.table import Table

    console = console or Console()
    t = Table(title="Evaluation by question type", title_justify="left")
    for i, c in enumerate(_COLUMNS):
        if i == 0:
            t.add_column(
                c, no_wrap=True, min_width=max(len(g.name) for g in [report.overall, *report.by_type])
            )
        else:
            t.add_column(c, justify="right")
    t.add_row(*_group_cells(report.overall), style="bold", end_section=True)
    for g in report.by_type:
        t.add_row(*_group_cells(g))
    console.print(t)

    s = Table(title="Refusals by scope", title_justify="left")
    for i, c in enumerate(("scope", "n", "refused", "refusal rate")):
        s.add_column(c, justify="left" if i == 0 else "right")
    for row in _scope_rows(report):
        s.add_row(*row)
    console.print(s)

    if report.stages:
        st = Table(title="Stage latency p50 (ms)", title_justify="left")
        st.add_column("type")
        for name in report.stages:
            st.add_column(name, justify="right")
        for g in [report.overall, *report.by_type]:
            st.add_row(g.name, *(_ms(g.stage_p50_ms.get(x)) for x in report.stages))
        console.print(st)
    for n in _notes(report):
        console.print(f"[dim]- {n}[/dim]")
