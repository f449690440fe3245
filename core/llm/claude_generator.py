"""Claude writes the answer from the retrieved provisions, every claim tied to the text it rests on.

Request (Messages API, citations feature):
* `system`: the versioned prompt `prompts/answer_system.v2.md`, as one text block marked
  `cache_control: ephemeral` (the fixed prefix is cached once it is long enough for the model);
* `messages`: the last `history_turns` turns of the conversation as plain user/assistant messages,
  then one user message whose content is one `document` block per retrieved chunk (plain text, the
  chunk's exact text, title = its citation label, citations enabled; knowledge-graph facts —
  `ScoredChunk.kind == "kg"` — go in the same way, marked as such in the block's `context`)
  followed by the question as a text block. Document and user text never enter the system prompt.

Response: each `char_location` citation names a document index → a chunk id and label. Its
`cited_text` is checked against the chunk text: kept when verbatim, repaired when it differs only
in whitespace (the quote becomes the chunk's own text at the nearest match), dropped otherwise
(wrong index, unknown type, not in the chunk, or a knowledge-graph fact: facts are paraphrases, so
they are never shown as quotes of the law). The shown answer is the concatenated text blocks
with `[n]` after each block that has a kept citation; `n` numbers chunks in order of first citation;
every `Citation.quote` is a verbatim substring of its chunk's text. Counters go to
`Answer.diagnostics`.

Abstention: the prompt makes the model put `NOT_COVERED` alone on its first line when the
provisions do not answer; such replies become the standard refusal (`refused=True`) naming the
nearest provisions. A reply *without* the marker but with zero kept citations is not grounded: the
generator raises `UngroundedAnswerError`, and `FallbackGenerator` answers with the extractive
generator instead (which quotes the provisions or abstains on its own evidence) — so the decision
rests on the citations, not on the wording alone.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Sequence

from core.errors import LLMError, LLMRefusal, UngroundedAnswerError
from core.extractive import REFUSAL_TEXT
from core.llm.client import ClaudeClient, model_request_options
from core.llm.models import DEFAULT_ANSWER_MODEL
from core.llm.prompts import load_prompt
from core.types import Answer, Citation, ScoredChunk, Turn, Usage

NOT_COVERED_MARKER = "NOT_COVERED"
ANSWER_PROMPT = "answer_system.v2"

_MARKER_AT_START = re.compile(r"\A\W*" + NOT_COVERED_MARKER + r"\b\W*")
_MARKER_LINE = re.compile(r"^\W*" + NOT_COVERED_MARKER + r"\W*$", re.MULTILINE)


@dataclass(frozen=True)
class ClaudeGeneratorConfig:
    model: str = DEFAULT_ANSWER_MODEL
    max_tokens: int = 2048  # thinking tokens count towards this on models that think
    # Sent only to models that accept it (see client.model_request_options); Claude 5-generation
    # models reject non-default sampling parameters, so there the model default applies.
    temperature: float | None = 0.0
    effort: str | None = "low"  # output_config.effort where supported; None = model default
    history_turns: int = 6  # prior turns sent with the question (0 = none)
    prompt: str = ANSWER_PROMPT


@dataclass(frozen=True)
class CheckedCitation:
    status: str  # "verified" | "repaired" | "dropped"
    context_index: int | None = None
    quote: str = ""
    why: str = ""


class ClaudeGenerator:
    """Implements core.pipeline.Generator; raises LLMError on failure (wrap it in FallbackGenerator)."""

    def __init__(
        self, client: ClaudeClient, config: ClaudeGeneratorConfig = ClaudeGeneratorConfig(), system_prompt: str | None = None
    ) -> None:
        self.client = client
        self.config = config
        self.system_prompt = system_prompt if system_prompt is not None else load_prompt(config.prompt)

    @property
    def model_name(self) -> str:
        return self.config.model

    # -- Generator -----------------------------------------------------------------------------

    def generate(
        self,
        question: str,
        contexts: Sequence[ScoredChunk],
        history: Sequence[Turn] = (),
        query_vector: Any = None,
        asked: str | None = None,
        asking_vectors: Any = None,  # Claude reads the question itself
    ) -> Answer:
        documents = [sc for sc in contexts if sc.chunk.text.strip()]
        if not documents:
            return _refusal(contexts, [], Usage(), self.config.model, {"no_contexts": 1})
        # Claude reads the user's own words when they are not English, and answers in their language.
        message = self.client.create_message(**self.build_request(asked or question, documents, history))
        return self.parse_response(message, documents, contexts)

    # -- request -------------------------------------------------------------------------------

    def build_request(
        self, question: str, documents: Sequence[ScoredChunk], history: Sequence[Turn] = ()
    ) -> dict[str, Any]:
        content: list[dict[str, Any]] = [document_block(sc) for sc in documents]
        content.append({"type": "text", "text": question})
        messages = history_messages(history, self.config.history_turns)
        messages.append({"role": "user", "content": content})
        return {
            "model": self.config.model,
            "max_tokens": self.config.max_tokens,
            "system": [{"type": "text", "text": self.system_prompt, "cache_control": {"type": "ephemeral"}}],
            "messages": messages,
            **model_request_options(self.config.model, temperature=self.config.temperature, effort=self.config.effort),
        }

    # -- response ------------------------------------------------------------------------------

    def parse_response(
        self, message: Any, documents: Sequence[ScoredChunk], contexts: Sequence[ScoredChunk] | None = None
    ) -> Answer:
        usage = usage_from(message.usage)
        model = getattr(message, "model", None) or self.config.model
        stop_reason = getattr(message, "stop_reason", None)
        if stop_reason == "refusal":
            raise LLMRefusal("the model declined to answer (stop_reason=refusal)", usage=usage)
        blocks = [b for b in message.content if getattr(b, "type", None) == "text"]
        raw_text = "".join(b.text or "" for b in blocks)
        if not raw_text.strip():
            why = "the answer was cut off at max_tokens" if stop_reason == "max_tokens" else "no text in the reply"
            raise LLMError(why, reason="empty answer", usage=usage)

        diag = {"citations_total": 0, "citations_verified": 0, "citations_repaired": 0, "citations_dropped": 0}
        numbers: dict[int, int] = {}  # context index -> [n]
        seen: set[tuple[int, str]] = set()
        citations: list[Citation] = []
        parts: list[str] = []
        uncited = 0
        for block in blocks:
            text = block.text or ""
            marks: list[int] = []
            for raw in getattr(block, "citations", None) or []:
                diag["citations_total"] += 1
                checked = check_citation(raw, documents)
                diag[f"citations_{checked.status}"] += 1
                if checked.status == "dropped":
                    continue
                assert checked.context_index is not None
                chunk = documents[checked.context_index].chunk
                n = numbers.setdefault(checked.context_index, len(numbers) + 1)
                if n not in marks:
                    marks.append(n)
                key = (checked.context_index, checked.quote)
                if key not in seen:
                    seen.add(key)
                    citations.append(Citation(n=n, chunk_id=chunk.id, label=chunk.label, quote=checked.quote))
            if marks:
                body, trailing = _split_trailing_space(text)
                parts.append(body + " " + "".join(f"[{n}]" for n in marks) + trailing)
            else:
                if re.search(r"[^\W\d_]{3,}", text) and not _MARKER_LINE.fullmatch(text.strip()):
                    uncited += 1
                parts.append(text)
        diag["citations_shown"] = len(citations)
        diag["uncited_blocks"] = uncited
        if stop_reason == "max_tokens":
            diag["truncated"] = 1

        if _MARKER_AT_START.match(raw_text.lstrip()):
            cited_labels = [documents[i].chunk.label for i in numbers]
            diag["not_covered"] = 1
            return _refusal(contexts if contexts is not None else documents, cited_labels, usage, model, diag)
        if not citations:
            raise UngroundedAnswerError(
                f"answer with no verifiable citation ({diag['citations_total']} returned, "
                f"{diag['citations_dropped']} dropped)",
                usage=usage,
                diagnostics={**diag, "ungrounded": 1},
            )
        text = _tidy(_MARKER_LINE.sub("", "".join(parts)))
        note = "Claude's answer was cut off at the length limit." if stop_reason == "max_tokens" else ""
        return Answer(
            text=text, refused=False, citations=citations, usage=usage, model=model, note=note, diagnostics=diag
        )


# --- helpers ----------------------------------------------------------------------------------


def document_block(sc: ScoredChunk) -> dict[str, Any]:
    chunk = sc.chunk
    if sc.kind == "kg":
        context = f"Knowledge-graph fact derived from {chunk.doc_title}; not the text of the regulation itself."
    else:
        context = chunk.doc_title + (f" — {chunk.heading}" if chunk.heading else "")
    return {
        "type": "document",
        "source": {"type": "text", "media_type": "text/plain", "data": chunk.text},
        "title": chunk.label,
        "context": context,
        "citations": {"enabled": True},
    }


def history_messages(history: Sequence[Turn], max_turns: int) -> list[dict[str, Any]]:
    """The last `max_turns` non-empty turns, starting with a user turn (the API requires it)."""
    if max_turns <= 0:
        return []
    turns = [t for t in history if t.role in ("user", "assistant") and t.content.strip()][-max_turns:]
    while turns and turns[0].role != "user":
        turns.pop(0)
    return [{"role": t.role, "content": t.content} for t in turns]


def check_citation(raw: Any, documents: Sequence[ScoredChunk]) -> CheckedCitation:
    """Verify one API citation against the chunk it points to (see the module docstring)."""
    get = raw.get if isinstance(raw, dict) else (lambda k, d=None: getattr(raw, k, d))
    if get("type") != "char_location":
        return CheckedCitation("dropped", why=f"unsupported citation type {get('type')!r}")
    index = get("document_index")
    if not isinstance(index, int) or not 0 <= index < len(documents):
        return CheckedCitation("dropped", why=f"document_index {index!r} out of range")
    if documents[index].kind == "kg":
        # A graph fact is a paraphrase ("employer — must — ..."), not the regulation's wording: it may
        # guide the answer, but a quote of it must never be shown as a quote of the law.
        return CheckedCitation("dropped", index, why="cites a knowledge-graph fact, not the regulation's text")
    text = documents[index].chunk.text
    cited = get("cited_text") or ""
    if not cited.strip():
        return CheckedCitation("dropped", index, why="empty cited_text")
    start, end = get("start_char_index"), get("end_char_index")
    at_indexes = (
        text[start:end] if isinstance(start, int) and isinstance(end, int) and 0 <= start < end <= len(text) else None
    )
    if at_indexes == cited or cited in text:
        return CheckedCitation("verified", index, cited.strip())
    span = find_ignoring_whitespace(text, cited, near=start if isinstance(start, int) else 0)
    if span is not None:
        quote = text[span[0] : span[1]].strip()
        if quote:
            return CheckedCitation("repaired", index, quote, why="whitespace differs from the chunk")
    return CheckedCitation("dropped", index, why="cited_text not found in the chunk")


def find_ignoring_whitespace(text: str, needle: str, near: int = 0) -> tuple[int, int] | None:
    """Span of `text` equal to `needle` when all whitespace is ignored (nearest to `near`)."""
    kept = [i for i, ch in enumerate(text) if not ch.isspace()]
    squeezed = "".join(text[i] for i in kept)
    target = "".join(needle.split())
    if not target:
        return None
    best: tuple[int, int] | None = None
    pos = squeezed.find(target)
    while pos != -1:
        span = (kept[pos], kept[pos + len(target) - 1] + 1)
        if best is None or abs(span[0] - near) < abs(best[0] - near):
            best = span
        pos = squeezed.find(target, pos + 1)
    return best


def usage_from(raw: Any) -> Usage:
    def n(name: str) -> int:
        return int(getattr(raw, name, 0) or 0)

    return Usage(
        input_tokens=n("input_tokens"),
        output_tokens=n("output_tokens"),
        cache_creation_input_tokens=n("cache_creation_input_tokens"),
        cache_read_input_tokens=n("cache_read_input_tokens"),
    )


def _refusal(
    contexts: Sequence[ScoredChunk], cited_labels: list[str], usage: Usage, model: str, diagnostics: dict[str, int]
) -> Answer:
    nearest: list[str] = []
    for label in [*cited_labels, *(sc.chunk.label for sc in contexts)]:
        if label not in nearest:
            nearest.append(label)
        if len(nearest) == 3:
            break
    text = REFUSAL_TEXT
    if nearest:
        text += " The nearest provisions I found are " + "; ".join(nearest) + "."
    return Answer(text=text, refused=True, citations=[], usage=usage, model=model, diagnostics=diagnostics)


def _split_trailing_space(text: str) -> tuple[str, str]:
    body = text.rstrip()
    return body, text[len(body) :]


def _tidy(text: str) -> str:
    text = re.sub(r"[ \t]+\n", "\n", text)
    text = re.sub(r"\n{3,}", "\n\n", text)
    return text.strip()
