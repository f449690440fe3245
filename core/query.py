"""What a question asks, made searchable: its focus pieces and its corrected, expanded wording.

People write "We're a Dutch bank with a scoring model from a US vendor. Do we legally have to train our
staff on AI under the AI Act, even though we only use the tool?" The sentence that answers ("shall take
measures to ensure ... AI literacy of their staff") is close in meaning to "train our staff on AI" and
far from the whole message, whose embedding is pulled toward banks, vendors and "AI Act", words every
provision shares. So besides the whole question, retrieval also embeds its *focus pieces*: each sentence
and clause on its own, without the law's name and the small talk around it, and for "is X considered
high-risk / is it banned to X" questions, the X being asked about. The ranker (core/ranking.py) takes
each provision's best match over the pieces as one of its signals.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from core.lexicon import NormalisedQuestion
from core.text import content_terms

MAX_PIECES = 4
MIN_PIECE_WORDS = 3
# "what are the penalties, if we use an AEDT without a bias audit?": the clause that asks may hold a
# single key word, and it is what the question is about; other one-word clauses are small talk.
_ASKING_CLAUSE = re.compile(r"^(?:what(?:['’]s|s)?|who|how\s+(?:much|many|long|often|high))\b", re.IGNORECASE)
# "it", "that" ... as the thing asked about stand for what the clause before says; a clause that only
# qualifies ("which is fine", "if we hire") names nothing to stand for.
# "we" and "I" as the subject stand for what the clause before says about who asks.
_PRONOUNS = frozenset("it that this they these those us me them we i".split())
_QUALIFYING_CLAUSE = re.compile(
    r"^(?:which|who|when|if|unless|although|because|even though|since|while|given)\b", re.IGNORECASE
)

# Where one ask ends and the next begins: sentence ends, dashes, and a comma before a new clause.
_CLAUSE_BREAK = re.compile(
    r"(?<=[.?!;])\s+|\s+[—–]\s+|\s+-\s+"
    r"|,\s+(?=(?:or|but|even though|although|because|since|so|which|while|if|when|unless|given)\b)"
    # "we use AI to screen CVs, is that high-risk?", "we are a start-up in Berlin, does the act apply to
    # us?": a question about what the clause before says
    r"|,\s+(?=(?:is|are|does|do|can|could|would|will|should|must)\s+"
    r"(?:it|that|this|they|these|those|we|there|the\s+(?:act|law|regulation|rules))\b)"
    r"|\s+(?=(?:even though|although|because|given that|unless|if|when)\b)",
    re.IGNORECASE,
)
# Words that open a message without asking anything.
_OPENING = re.compile(
    r"^(?:(?:so|ok|okay|and|but|also|hi|hey|hello|quick question|question|follow[- ]up|sorry|thanks)\b[,:!]?\s*)+",
    re.IGNORECASE,
)
# How users name the law itself (every provision of the collection shares it, so it only dilutes a search).
THE_LAW = re.compile(
    r"(?:EU\s+)?(?:AI Act|Artificial Intelligence Act|Local Law 144|LL\s?144|NYC(?:'s)? (?:AEDT )?(?:law|rules?)|"
    r"DCWP(?:'s)? rules?|this (?:law|regulation)|the (?:law|rules|regulation))",
    re.IGNORECASE,
)
_THE_LAW = re.compile(
    r"\b(?:under|in|by|from|of|according to|per|for)?\s*(?:the\s+)?" + THE_LAW.pattern + r"\b", re.IGNORECASE
)
# "is X considered high-risk", "does X count as a provider", "is it banned to X": the X is asked about.
_CLASSIFY = re.compile(
    r"^(?:is|are|was|would|will|does|do|could|can)\s+(?P<subject>.+?)\s+"
    r"(?:be\s+)?(?:considered|count(?:ed|s)?\s+as|classified\s+as|qualif(?:y|ies)\s+as|deemed|treated\s+as|"
    r"(?P<scope>fall(?:s)?(?:\s+(?:under|within)|\s*$)|covered(?:\s+by)?)|seen\s+as|regarded\s+as|"
    r"(?:(?:a\s+)?high[- ]risk|prohibited|banned)(?:\s+(?:AI\s+)?(?:system|tool|use|case|practice)s?)?\s*$)",
    re.IGNORECASE,
)
_ALLOWED = r"(?:banned|prohibited|allowed|legal|illegal|permitted|ok|okay)"
_IS_IT_ALLOWED = re.compile(
    r"^(?:is|are)\s+(?:it|we|they)\s+" + _ALLOWED + r"\s+(?:to|for)\s+(?P<subject>.+)$",
    re.IGNORECASE,
)
# "... cameras that read our staff's moods. Is that (even) allowed (in the EU)?": the clause before.
_IS_THAT_ALLOWED = re.compile(
    r"^(?:is|are)\s+(?P<subject>that|this|it|these|those)\s+(?:even\s+|actually\s+|really\s+|still\s+|legally\s+)?"
    + _ALLOWED + r"\b(?:\s+(?:in|within)\s+(?:the\s+)?(?:EU|Europe|Union))?"
    r"(?:\s+or\s+.*)?$",
    re.IGNORECASE,
)
# "can we use emotion recognition on our staff?", "may an employer run X?": whether X is allowed at all.
_CAN_WE_USE = re.compile(
    r"^(?:can|may|could)\s+(?:we|i|you|companies|employers|(?:an?|our|the)\s+\w+)\s+"
    r"(?:legally\s+|still\s+|even\s+|actually\s+|really\s+)?(?:use|deploy|run|roll\s+out|install|sell|offer)\s+"
    r"(?P<subject>.+)$",
    re.IGNORECASE,
)
# "we're a US startup selling into Germany - are we on the hook (under the AI Act)?": whether the law covers them.
_ON_THE_HOOK = re.compile(
    r"^(?:are|am|is)\s+(?P<subject>we|i|they|it|that|this|(?:our|the)\s+\w+)\s+(?:even\s+|still\s+|really\s+|actually\s+|also\s+)?"
    r"(?:on\s+the\s+hook|in\s+scope|caught|affected|subject\s+to\s+(?:it|this|that))\b",
    re.IGNORECASE,
)
# "does the act apply to X", "would it still apply to X": X against the list that says what the law
# covers (the law's own name is gone by then: "does apply to X").
_APPLIES_TO = re.compile(
    r"^(?:does|do|would|will|could|can)\s+(?:(?:the\s+)?(?:act|regulation|law)\s+|it\s+|this\s+|that\s+)?"
    r"(?:still\s+|even\s+|also\s+|really\s+|actually\s+)?apply\s+to\s+(?P<subject>.+)$",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class QueryPlan:
    """What retrieval searches for one question."""

    text: str  # the standalone question, spelling corrected and abbreviations expanded: searched
    pieces: tuple[str, ...] = ()  # its focus pieces (never the text itself)
    corrections: tuple[tuple[str, str], ...] = ()
    expansions: tuple[tuple[str, str], ...] = ()
    question: str = ""  # spelling corrected only: what the answer is judged against
    # "is X high-risk?": the X asked about (one of the pieces) and the category's word stems
    # ("high", "risk"); empty for any other question.
    subject: str = ""
    category: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        if not self.question:
            object.__setattr__(self, "question", self.text)

    @classmethod
    def of(cls, normalised: NormalisedQuestion) -> "QueryPlan":
        pieces = tuple(focus_pieces(normalised.text))
        asked = classification(normalised.text)
        subject, category = asked if asked is not None and asked[0] in pieces else ("", frozenset())
        return cls(
            text=normalised.text,
            pieces=pieces,
            corrections=normalised.corrections,
            expansions=normalised.expansions,
            question=normalised.corrected,
            subject=subject,
            category=category,
        )


# Words of a classification clause that say "is it in the category", not which category it is.
_CLASSIFYING_WORDS = frozenset(content_terms(
    "be considered count counted counts as classified qualify qualifies deemed treated fall falls under within "
    "covered by seen regarded automatically ai system systems tool tools use uses case cases practice practices act"
))
# The same category in other words: what the law calls prohibited, people call banned.
_CATEGORY_SYNONYMS = {"ban": "prohibit"}
# Whether X is allowed at all is answered by the list of what is prohibited; whether the law applies
# to X, by the list of what it covers (its "Scope").
_PROHIBITED = frozenset(content_terms("prohibited"))
_SCOPE = frozenset(content_terms("scope"))
# The patterns that find the thing asked about, in the order they are tried, with the category each
# implies (None: the words after the thing name it).
_ASKED_ABOUT: tuple[tuple[re.Pattern[str], frozenset[str] | None], ...] = (
    (_IS_IT_ALLOWED, _PROHIBITED),
    (_IS_THAT_ALLOWED, _PROHIBITED),
    (_APPLIES_TO, _SCOPE),
    (_CLASSIFY, None),
    (_CAN_WE_USE, _PROHIBITED),
    (_ON_THE_HOOK, _SCOPE),
)


def _clauses(question: str) -> list[str]:
    """The question's clauses without the law's name, small talk and end punctuation."""
    out = []
    for part in _CLAUSE_BREAK.split(question):
        if part:
            part = _OPENING.sub("", _THE_LAW.sub(" ", part).strip()).strip(" ,.;:?!\"'")
            out.append(" ".join(part.split()))
    return out


def _bare(phrase: str) -> str:
    return phrase.strip(" ,.;:?!")


def classification(question: str) -> tuple[str, frozenset[str]] | None:
    """("CV-screening tool", {"high", "risk"}) for "Is our CV-screening tool high-risk?": the thing
    asked about and the word stems of the category it may belong to; None for other questions. "Is it
    allowed to X?" asks whether X is prohibited, "does the act apply to X / is X covered?" whether X is
    in its scope. When the thing is a pronoun ("We use AI to screen CVs. Is that high-risk?", "does it
    apply to us?"), it is what the clause before says."""
    clauses = _clauses(question)
    for n, part in enumerate(clauses):
        found = next(((m, implied) for pattern, implied in _ASKED_ABOUT if (m := pattern.match(part))), None)
        if found is None:
            continue
        m, category = found
        if category is None:
            category = frozenset(
                _CATEGORY_SYNONYMS.get(t, t) for t in content_terms(part[m.end("subject"):]) if t not in _CLASSIFYING_WORDS
            )
            if not category and m.group("scope"):
                category = _SCOPE  # "is X covered (by the act)?", "does X fall under it?"
        if category:
            subject = _bare(m.group("subject"))
            if subject.lower() in _PRONOUNS:
                before = [c for c in clauses[:n] if c and not _QUALIFYING_CLAUSE.match(c)]
                subject = before[-1] if before else subject
            return subject, category
    return None


def focus_pieces(question: str) -> list[str]:
    """The question's sentences and clauses that ask something, cleaned of the law's name and small
    talk, plus the subject of a classification question; at most MAX_PIECES, never the question itself."""
    pieces: list[str] = []
    for part in _clauses(question):
        for pattern, _ in _ASKED_ABOUT:
            m = pattern.match(part)
            if m and _bare(m.group("subject")).lower() not in _PRONOUNS:
                pieces.append(_bare(m.group("subject")))
                break
        pieces.append(part)
    out: list[str] = []
    whole = " ".join(question.split()).strip(" ?.!").lower()
    for piece in pieces:
        if (
            len(piece.split()) >= MIN_PIECE_WORDS
            and (len(content_terms(piece)) >= 2 or (_ASKING_CLAUSE.match(piece) and content_terms(piece)))
            and piece.lower() != whole
            and piece not in out
        ):
            out.append(piece)
    return out[:MAX_PIECES]
