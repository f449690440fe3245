"""Small text utilities shared by answer selection: content words, stemming, sentence spans."""
from __future__ import annotations

import re
from functools import lru_cache

import Stemmer  # PyStemmer: C Snowball stemmers

# Section numbers ("20-870", "5-301") stay whole: they are what compliance questions cite.
_TOKEN = re.compile(r"\d+(?:-\d+)+|[a-z0-9]+")

STOPWORDS = frozenset(
    """a about above after again against all am an and any are aren't as at be because been before
    being below between both but by can could did do does doing down during each few for from further
    had has have having he her here hers herself him himself his how i if in into is it its itself
    just me more most my myself no nor not now of off on once only or other our ours ourselves out over
    own same she should so some such than that the their theirs them themselves then there these they
    this those through to too under until up very was we were what when where which while who whom why
    will with would you your yours yourself yourselves s t d ll m re ve y i.e e.g also per via upon
    shall may must whats without""".split()
)


_SNOWBALL = Stemmer.Stemmer("english")


@lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """Snowball (Porter 2) stem; section numbers and other digit tokens stay as they are."""
    if word[0].isdigit():
        return word
    return _SNOWBALL.stemWord(word)


def tokens(text: str) -> list[str]:
    return _TOKEN.findall(text.lower())


@lru_cache(maxsize=8192)
def word_set(text: str) -> frozenset[str]:
    """The distinct tokens of `text`. Cached: the pipeline compares the same retrieved chunks for
    near-duplicates and novelty several times per question, question after question."""
    return frozenset(tokens(text))


@lru_cache(maxsize=8192)
def word_runs(text: str, n: int = 4) -> frozenset[tuple[str, ...]]:
    """The distinct runs of `n` consecutive tokens of `text` (shingles): two copies of one text share
    nearly all of them, two texts that merely use the same words do not."""
    words = tokens(text)
    return frozenset(tuple(words[i : i + n]) for i in range(len(words) - n + 1))


# Words that frame a question rather than say what it is about ("Can you explain what ... means
# according to the document?"). They are ignored when judging whether provisions answer a question.
QUESTION_FRAMING = frozenset(
    stem(w)
    for w in """explain explanation understand know want like need please tell describe clarify clarification
    seek seeking trying try according document documents mention mentioned context regarding relation
    related relationship difference different differ compare comparison concept meaning mean means refer
    refers specific specifically definition define defined question answer help wondering curious
    provided stated say says""".split()
)

# Framing words that are also the law's own words ("providers", "Member States", "technical
# documentation", "right to explanation"): they frame a question only inside a framing phrase
# ("according to the document", "as stated in", "give an explanation of").
_LAW_WORDS_IN_FRAMING = frozenset(stem(w) for w in "provided stated document documents explanation".split())
_FRAMING_PHRASE = re.compile(
    r"\b(?:according to|in|from|by|of|within) the documents?\b|\bthe documents? (?:says?|states?|mentions?|provides?)\b"
    r"|\bas (?:stated|provided|mentioned|described)\b|\b(?:is|are|was|were) stated\b"
    r"|\b(?:give|provide|offer) (?:an? |some )?explanation\b",
    re.IGNORECASE,
)


def framing_terms(question: str) -> frozenset[str]:
    """The stems of `question` that frame it rather than say what it asks about: QUESTION_FRAMING,
    except that a word the law also uses for what it regulates frames only inside a framing phrase
    ("Am I entitled to an explanation?" asks about the explanation; "explain" always frames)."""
    framed = {stem(t) for m in _FRAMING_PHRASE.finditer(question) for t in tokens(m.group(0))}
    return (QUESTION_FRAMING - _LAW_WORDS_IN_FRAMING) | (_LAW_WORDS_IN_FRAMING & framed)


# A message's sentences as people type them: up to and with their closing ".", "?" or "!" (leading
# spaces kept), for telling the sentences that ask from the scene around them.
_MESSAGE_SENTENCE = re.compile(r"[^.?!]+[.?!]*")


def message_sentences(text: str) -> list[str]:
    """The sentences of a chat message, verbatim (each with its leading spaces)."""
    return _MESSAGE_SENTENCE.findall(text)


def asking_sentences(question: str) -> list[str]:
    """The sentences of a message that ask (end in "?"); its last sentence when none does. A
    message's statements set the scene ("We're Acme Corp, hiring in Berlin."), its questions ask."""
    sentences = [s for s in message_sentences(question.strip()) if s.strip()]
    asking = [s for s in sentences if s.rstrip().endswith("?")]
    return asking or sentences[-1:] or [question]


def content_terms(text: str) -> list[str]:
    """Lower-cased, stop-words removed, stemmed terms, in order (duplicates kept)."""
    return [stem(t) for t in tokens(text) if t not in STOPWORDS and len(t) > 1]


# A sentence ends at . ; ? ! or : followed by space and an upper-case letter, an opening
# parenthesis (a new list item "(b)") or a digit list item. Abbreviations common in this
# text ("U.S.", "e.g.", "No.", "§") must not end a sentence.
_BOUNDARY = re.compile(r"(?<=[.;:?!])\s+(?=[A-Z(“\"]|\d+\.\s)")
_NO_SPLIT_BEFORE = re.compile(
    r"(?:\b(?:U\.S|e\.g|i\.e|No|Nos|Art|Arts|Sec|para|pp|p|Inc|Co|v|vs|St|Dr|Mr|Ms|Int|seq|et al|cf)\.|§"
    # a bare enumerator ("1.", "a.", "iv.") introduces the item after it; it ends nothing
    r"|(?:^|[\s(:])(?:\d{1,2}|[a-zA-Z]|[ivxIVX]{1,4})\.)$"
)


def sentence_spans(text: str, min_chars: int = 12) -> list[tuple[int, int]]:
    """Character spans of the sentences (and list items) of `text`, whitespace trimmed.

    Spans index the original string, so `text[a:b]` is always a verbatim quote.
    """
    spans: list[tuple[int, int]] = []
    start = 0
    for m in _BOUNDARY.finditer(text):
        if _NO_SPLIT_BEFORE.search(text[max(0, m.start() - 8) : m.start()]):  # look-behind window
            continue
        spans.append((start, m.start()))
        start = m.end()
    spans.append((start, len(text)))
    trimmed = []
    for a, b in spans:
        while a < b and text[a].isspace():
            a += 1
        while b > a and text[b - 1].isspace():
            b -= 1
        if b - a >= min_chars:
            trimmed.append((a, b))
        elif trimmed and b > a:
            # A fragment too short to stand alone ("(a)") joins the sentence before it.
            trimmed[-1] = (trimmed[-1][0], b)
    return trimmed


# Where a sentence cannot go on: a blank line, an HTML block tag, a Markdown heading or list line.
_BLOCK_BREAK = re.compile(
    r"\n[ \t]*\n|</?(?:p|div|li|ul|ol|h[1-6]|br|tr|td|th|table|section|article|blockquote)\b[^>]*>"
    r"|\n(?=[ \t]*(?:#{1,6}[ \t]|[-*+][ \t]|>[ \t]))",
    re.IGNORECASE,
)
# Markup at either end of a sentence: Markdown heading, list, quote and emphasis marks, HTML tags.
# (An emphasised enumerator, "**(a)**", goes with the marks: the quote cannot drop the inner ones.)
_LEADING_MARKUP = re.compile(
    r"(?:\s+|#{1,6}(?=\s)|[-+>](?=\s)|\*{1,3}\(\w{1,4}\)\*{1,3}|\*{1,3}|_{2,3}|</?[A-Za-z][^>]*>)+"
)
_TRAILING_MARKUP = re.compile(r"(?:\s+|\*{1,3}|_{2,3}|</?[A-Za-z][^>]*>)+$")
# A running page number or header left by a PDF: "3", "Page 3", "- 3 -", "3 of 11".
_PAGE_NUMBER = re.compile(r"^[-–\s]*(?:page\s+)?\d{1,4}(?:\s+of\s+\d{1,4})?[-–\s]*$", re.IGNORECASE)


def quotable_spans(text: str) -> list[tuple[int, int]]:
    """The sentences an answer may quote: `sentence_spans` within each block of the text (blocks end
    at blank lines, HTML block tags and Markdown headings), a bare heading ("(b) Test Data.") joined
    to the sentence after it, Markdown and HTML marks trimmed from both ends, page numbers dropped.
    Spans index `text`, so `text[a:b]` is always a verbatim quote."""
    spans: list[tuple[int, int]] = []
    start = 0
    for m in [*_BLOCK_BREAK.finditer(text), None]:
        end = m.start() if m is not None else len(text)
        block = text[start:end]
        if block.strip():
            for a, b in _merge_headings(block, sentence_spans(block)):
                trimmed = trim_markup(block, a, b)
                if trimmed is not None:
                    spans.append((start + trimmed[0], start + trimmed[1]))
        if m is not None:
            start = m.end()
    return spans


def trim_markup(text: str, a: int, b: int) -> tuple[int, int] | None:
    """(a, b) without markup at its ends; None when nothing quotable is left (a page number)."""
    lead = _LEADING_MARKUP.match(text, a, b)
    if lead:
        a = lead.end()
    trail = _TRAILING_MARKUP.search(text, a, b)
    if trail:
        b = trail.start()
    piece = text[a:b]
    if not any(ch.isalpha() for ch in piece) or _PAGE_NUMBER.match(piece):
        return None
    return a, b


# A sentence of at most this many words, with a sentence after it, is a heading (`_merge_headings`).
_HEADING_WORDS = 5


def after_heading(quote: str) -> int:
    """Where the sentence of a quotable span begins: after the bare heading `quotable_spans` joined to
    it ("b. Notices required. In the city, ..." -> the index of "In"), 0 when it has none."""
    spans = sentence_spans(quote)
    if len(spans) > 1 and len(quote[spans[0][0] : spans[0][1]].split()) <= _HEADING_WORDS:
        return spans[1][0]
    return 0


def _merge_headings(text: str, spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    pending: int | None = None
    for a, b in spans:
        if pending is not None:
            a = pending
            pending = None
        if len(text[a:b].split()) <= _HEADING_WORDS and b < len(text):
            pending = a
            continue
        merged.append((a, b))
    if pending is not None:
        merged.append((pending, spans[-1][1]))
    return merged
