"""What kind of value a question asks for, and whether a passage states one.

Some questions ask for a value: a duration ("How long must employers retain the data?"), an amount
("How much does a bias audit cost?"), a count, a percentage, an age, an average, or the tone of
something ("What was the general sentiment of the comments?"). Quoting provisions that share the
question's words but state no such value, or state one about something else (the employer's 3 years
of data when the question asks about the vendor's), answers a different question. In a legal answer
that is worse than saying the law is silent, so the extractive generator checks the asked-for value
before it quotes anything (QA systems call this the expected answer type).

Only the asked value is checked here; whether the passage is about the asked thing is judged by the
caller from the question's other terms (see `ExtractiveGenerator`).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from core.text import content_terms

_NUMBER_WORDS = (
    "one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|fifteen|twenty|thirty|forty|fifty|"
    "sixty|ninety|hundred|thousand|half|several|a few"
)
# A number, not a section number ("§ 20-871", "5-301") or a list enumerator ("1."): digits may carry
# thousands separators and decimals; words cover what the law writes out ("one year", "six months").
# A number, not a section number ("§ 20-871", "5-301"), a list enumerator ("1.") or part of an act's
# number ("Regulation (EU) 2016/679", "No 765/2008").
_NUMBER = rf"(?<![§\-\d/])(?:\d{{1,3}}(?:,\d{{3}})+|\d+(?:\.\d+)?)(?![\-\d/])|\b(?:{_NUMBER_WORDS})\b"
_TIME_UNIT = r"(?:business |calendar |working )?(?:second|minute|hour|day|week|month|year)s?"

# How each kind of value is written in the law.
_STATES = {
    "duration": re.compile(rf"(?:{_NUMBER})[\s-]+{_TIME_UNIT}\b|\b(?:annual|annually|yearly|monthly|weekly|daily)\b", re.I),
    "money": re.compile(r"[$€£]\s?\d|\b(?:dollars?|euros?|EUR|USD)\b", re.I),
    "percentage": re.compile(r"\d(?:\.\d+)?\s?%|\bper ?cent\b|\bpercentage\b", re.I),
    "count": re.compile(_NUMBER, re.I),
    "age": re.compile(r"\bage[sd]?\b|\byears? old\b|\byears of age\b", re.I),
    "date": re.compile(
        r"\b\d{1,2}\s+(?:January|February|March|April|May|June|July|August|September|October|November|December)\s+\d{4}\b"
        r"|\b(?:January|February|March|April|May|June|July|August|September|October|November|December)\s+\d{1,2},\s+\d{4}\b"
        r"|\bfrom the date of (?:entry into force|its entry)|\bon the \w+ day following\b",
        re.I,
    ),
    "statistic": re.compile(r"\b(?:average|mean|median)\b", re.I),
    # The moment a duty falls due, said without a number: "at the latest at the time of the first
    # interaction", "prior to putting it into service", "without undue delay".
    "moment": re.compile(
        r"\b(?:at the latest|no later than|not later than|prior to|at the time of|without (?:undue )?delay|"
        r"immediately|as soon as|before (?:(?:the|its|their|any|first|such)\s+)*(?:use|using|placing|putting|deploy\w*|"
        r"starting|being|it|they))\b",
        re.I,
    ),
    "opinion": re.compile(
        r"\b(?:sentiment|opinions?|attitudes?|in favou?r|supported|supportive|opposed|opposition|"
        r"critici[sz]\w*|welcomed|objected|objections?|praised|concerns? (?:about|over|regarding|with))\b",
        re.I,
    ),
}
_TIME_UNIT_WORD = re.compile(rf"^{_TIME_UNIT}$", re.I)


@dataclass(frozen=True)
class AskedValue:
    """The value a question asks for.

    `kinds`: every group must be stated ("the average age" needs an average and an age); within a
    group any kind will do ("how much" is an amount of money, a percentage or a number).
    `words`: stems of the words that ask for the value ("how many *years*"). They say what is
    asked, not what it is about, so they are left out when judging what a passage is about.
    """

    kinds: tuple[tuple[str, ...], ...]
    words: frozenset[str]
    # Stem of the question's subject when the question names one right after its verb ("For how
    # many years does *the vendor* provide ..."): a value from a provision that never mentions
    # the subject is someone else's (the employer's 3 years of data, not the vendor's).
    subject: str | None = None
    # False: a provision stating such a value should lead the answer, but one that states none may
    # still answer ("When do the rules apply?" -> "from the date of ...", "before use").
    required: bool = True
    # Stems of what a retention question asks about keeping ("how long must we keep *the applicant
    # data*" -> applic, data): a period for keeping something else (the summary of results) is not it.
    kept: frozenset[str] = frozenset()


# "is there a (legal / specific ...) X", "are there any X", "does the Act set a X"
_IS_THERE = (
    r"\b(?:is there|are there|does (?:the|this|it)\b[\w\s]{0,20}?\b(?:set|prescribe|specify|fix|impose|state))"
    r"\s+(?:(?:a|an|any|some|one)\s+)?(?:[\w./-]+\s+){0,3}?"
)
_IS_THERE_FEE = re.compile(_IS_THERE + r"(?:fee|fees|cost|costs|price|charge|charges|fine amount)\b", re.I)
_IS_THERE_PERIOD = re.compile(_IS_THERE + r"(?:deadline|time limit|time frame|timeframe|period|cycle|frequency)\b", re.I)
_IS_THERE_LIMIT = re.compile(
    _IS_THERE + r"(?:cap|ceiling|limit|threshold|cut-?off|minimum|maximum|quota|ratio|percentage)\b", re.I
)


def asks_whether_set(question: str) -> bool:
    """Whether `question` asks if the law sets a value at all ("Is there a pass/fail cutoff?"), not
    for the value of something it sets ("How old can the bias audit be?")."""
    return any(p.search(question) for p in (_IS_THERE_FEE, _IS_THERE_PERIOD, _IS_THERE_LIMIT))


_WHAT_IS_THE = r"\bwhat(?:\s+(?:is|was|are|were)|['’]s|s)\s+the\s+(?:(?:general|overall|public|typical|usual)\s+)?"
_Kinds = tuple[tuple[str, ...], ...]
_HOW_QUICKLY = "quickly|fast|promptly"  # "how quickly …?": a period or a moment
_ASKS: list[tuple[re.Pattern[str], _Kinds] | tuple[re.Pattern[str], _Kinds, bool]] = [
    # (pattern, kind groups[, required]); the first match wins.
    (re.compile(r"\bhow (?:long|soon)\b", re.I), (("duration",),)),
    # "How quickly do we have to tell the Commission?": a period ("within two weeks") or a moment
    # ("without undue delay") leads; the law may say neither.
    (re.compile(rf"\bhow (?:{_HOW_QUICKLY})\b", re.I), (("duration", "moment"),), False),
    (re.compile(r"\bhow often\b", re.I), (("duration",),)),
    # "how much heads-up / notice / time do candidates get?" asks for a period, not money.
    (
        re.compile(r"\bhow much (?:advance |prior |lead )?(?:notice|heads[- ]?up|time|warning|lead time)\b", re.I),
        (("duration",),),
    ),
    (re.compile(r"\bhow old\b", re.I), (("age", "duration"),)),
    # "What's the (maximum) fine?", "How much is the penalty?": an amount is asked; a provision that
    # states none (a court order, a warning) may still answer, so the amount leads the answer but is
    # not required. The penalty is what the question is about, so only the words before it ask
    # ("ask"; "verb" stays empty).
    (
        re.compile(
            r"\b(?P<ask>(?:what(?:['’]s|s| is| are| was| were| would be| could be)|"
            r"how (?:much|big|high|large) (?:is|are|was|were|would be|could be|can be|will be))\s+the\s+"
            r"(?:(?:max(?:imum)?|highest|biggest|possible|potential|likely|usual)\s+)?)"
            r"(?:fines?|penalt(?:y|ies)|sanctions?)\b(?P<verb>)",
            re.I,
        ),
        (("money", "percentage"),),
        False,
    ),
    # "What fine are we looking at?", "what kind of penalty do we face?", "what could we be fined?":
    # the same amount, asked the other way round.
    (
        re.compile(
            r"\b(?P<ask>what)\s+(?:(?:kind|sort|size|level|type)\s+of\s+)?(?:fines?|penalt(?:y|ies)|sanctions?)\b(?P<verb>)"
            r"(?=\s+(?:are|is|do|does|would|could|can|might|will|should|we|i|they|you|for|if|apply|applies)\b)",
            re.I,
        ),
        (("money", "percentage"),),
        False,
    ),
    (
        re.compile(
            r"\b(?P<ask>what)\s+(?:could|would|can|will|might)\s+(?:we|i|they|you|a company|the company)"
            r"\s+be\s+fined\b(?P<verb>)",
            re.I,
        ),
        (("money", "percentage"),),
        False,
    ),
    # "And the fines?", "what about penalties?": a follow-up naming only the penalty asks its amount.
    (
        re.compile(
            r"\b(?P<ask>and|what about|how about)\s+(?:the\s+)?(?:fines?|penalt(?:y|ies)|sanctions?)\b(?P<verb>)"
            r"(?=\s*(?:\(|\?|$))",
            re.I,
        ),
        (("money", "percentage"),),
        False,
    ),
    # An amount of money or a share: a bare number ("component 1", "Article 49") is not how much,
    # and a question about what something costs wants money, not the 2% of a threshold.
    (
        re.compile(
            r"\bhow much\b(?=.*\b(?:cost|costs|price|fee|fees|charge|charged|pay|paid|spend|budget|salary|salaries)\b)", re.I
        ),
        (("money",),),
    ),
    (re.compile(r"\bhow much\b", re.I), (("money", "percentage"),)),
    # "What (minimum accuracy) percentage ...?", "What fee does the AI Office charge?": the words
    # between say what of, and stay key terms.
    (
        re.compile(r"\b(?P<ask>what)\s+(?:[\w-]+\s+){0,2}?(?P<verb>percentage|percent|share|proportion)\b", re.I),
        (("percentage",),),
    ),
    (re.compile(r"\b(?P<ask>what)\s+(?:[\w-]+\s+)?(?P<verb>fees?|price)\b", re.I), (("money",),)),
    # "What's the maximum number of people we can enrol?" asks for a count: a clause that states
    # none (the conditions of the test) does not answer it.
    (
        re.compile(_WHAT_IS_THE + r"(?:max(?:imum)?|min(?:imum)?|highest|lowest|largest|smallest)\s+number\s+of\b", re.I),
        (("count",),),
    ),
    (re.compile(_WHAT_IS_THE + r"(?:average|mean|median) age\b", re.I), (("statistic",), ("age",))),
    (re.compile(_WHAT_IS_THE + r"(?:average|mean|median)\b", re.I), (("statistic",),)),
    (re.compile(_WHAT_IS_THE + r"ages?\b", re.I), (("age",),)),
    (re.compile(_WHAT_IS_THE + r"(?:sentiment|opinion|attitude|reaction|tone|mood)\b", re.I), (("opinion",),)),
    # "When do the rules on X apply / start / take effect?" asks for a date (or a period from one).
    (
        re.compile(
            r"\b(?P<ask>when|from when|by when|as of when|what date)\b(?:\s+[\w'-]+){0,12}?\s+"
            r"(?P<verb>apply|applies|applied|start|starts|begin|begins|take effect|takes effect|kick in|kicks in|"
            r"come into (?:force|effect)|enter into force|enters into force|in force|effective|go live)\b",
            re.I,
        ),
        (("date", "duration"),),
        False,
    ),
    # "Is there a fee / a deadline / a cap ...?" asks whether the law sets a value: it does only if a
    # clause states one about the thing asked.
    (_IS_THERE_FEE, (("money",),)),
    (_IS_THERE_PERIOD, (("duration",),)),
    (_IS_THERE_LIMIT, (("count", "percentage", "money", "duration"),)),
    # "Must we keep the records for some number of years?" asks for the period (the question opens the
    # clause, the period is asked at its end; only those words ask).
    (
        re.compile(
            r"\b(?:is|are|do|does|did|must|should|shall|will|would|can|could)\b[^?.;]{0,100}?"
            r"\b(?P<ask>for\s+(?:some|a\s+certain|a\s+minimum|a\s+set|a\s+specific|a\s+fixed|any)\s+"
            r"(?:(?:number|amount|length)\s+of\s+(?:years|months|weeks|days|time)|period(?:\s+of\s+time)?|"
            r"years|months|weeks|days))\b(?P<verb>)",
            re.I,
        ),
        (("duration",),),
    ),
    # "By what date ...?" asks for the date (a period from an event will do).
    (re.compile(r"\bby what date\b", re.I), (("date", "duration"),)),
    # "At what point in the chat does that have to be shown?", "when do we have to tell them?" ask
    # when a duty falls due: a clause saying so leads ("at the latest at the time of the first
    # interaction", "10 business days before use"); one that does not may still answer.
    (
        re.compile(
            r"\b(?P<ask>at what (?:point|stage|moment|time)|how early|when)\b(?P<verb>)"
            r"(?=(?:\s+[\w'’-]+){0,3}?\s+(?:have|has|need|needs|got|required|supposed|obliged)\s+to\b"
            r"|\s+(?:must|should|shall)\b"
            r"|\s+(?:in|during)\b|\s+(?:does|do|is|are)\s+(?:that|this|it)\s+(?:have|need)\s+to\b)",
            re.I,
        ),
        (("moment", "duration", "date"),),
        False,
    ),
]
_HOW_MANY = re.compile(r"\bhow many (\w+(?: \w+){0,2})", re.I)


# "how many years does the vendor ...": the auxiliary after the wh-phrase, then the subject.
_SUBJECT = re.compile(
    rf"\bhow (?:many|much|long|soon|{_HOW_QUICKLY}|often|old)\b(?:\s+[\w-]+){{0,4}}?\s+"
    r"(?:do|does|did|is|are|was|were|must|should|shall|can|could|will|would|has|have|had|may)\s+"
    r"(?:(?:the|a|an|its|their|each|every|this|that)\s+)?([A-Za-z][\w-]*)",
    re.I,
)


# What may stand before the words that ask for a value when they open a clause: "How long ...",
# "Within how many days ...", "..., and if so how much?", "ok and roughly how much ...". After any other
# word the phrase is embedded in another question ("Do we have to say what data we collect and how
# long we keep it?" asks whether to disclose, not for a period).
_CLAUSE_OPENING = re.compile(
    r"(?:^|[.?!;:,(]\s*|\s[—–-]\s*)"
    r"(?:(?:and|so|ok|okay|but|also|then|if so|roughly|exactly|approximately|about|within|for|after|by|in|"
    r"up to|until|at|to|under)\s+)*$",
    re.IGNORECASE,
)


def _opens_clause(question: str, start: int) -> bool:
    return _CLAUSE_OPENING.search(question[:start]) is not None


def asked_value(question: str) -> AskedValue | None:
    """The value `question` asks for, or None when it asks for something else (a rule, a duty, ...)."""
    subject = _subject(question)
    many = next((m for m in _HOW_MANY.finditer(question) if _opens_clause(question, m.start())), None)
    if many is not None:
        words = many.group(1).split()
        # "how many (business) days" asks for a duration; "how many employees" for a count.
        for n in range(len(words), 0, -1):
            if _TIME_UNIT_WORD.match(" ".join(words[:n])):
                asking = content_terms("how many " + " ".join(words[:n]))
                return AskedValue((("duration",),), frozenset(asking), subject, kept=_kept(question, many.start()))
        # The counted thing ("employees") is what the question is about: it stays a key term.
        return AskedValue((("count",),), frozenset(content_terms("how many")), subject)
    for rule in _ASKS:
        pattern, kinds = rule[0], rule[1]
        required = rule[2] if len(rule) == 3 else True
        for m in pattern.finditer(question):
            if _opens_clause(question, m.start()):
                # The words that ask, not the subject between them ("when do *the GPAI rules* apply").
                words = " ".join(m.group(g) for g in ("ask", "verb")) if "ask" in pattern.groupindex else m.group(0)
                kept = _kept(question, m.start()) if ("duration",) in kinds else frozenset()
                return AskedValue(kinds, frozenset(content_terms(words)), subject, required=required, kept=kept)
    return None


# "keep the applicant data", "hang on to copies of the declaration": what is kept, up to the first
# word that is not part of its name.
_KEEP = re.compile(
    r"\b(?:keep|retain|store|preserve|archive|hold on ?to|hang on ?to)\s+"
    r"(?:(?:the|our|their|its|all|any|this|that|these|those|such|a|an)\s+)?(?P<kept>(?:[\w-]+\s+){0,3}[\w-]+)",
    re.I,
)


def _kept(question: str, at: int) -> frozenset[str]:
    """The stems of what the sentence asking at `at` asks about keeping; empty for a pronoun ("keep
    it") or no keeping. ("We keep a log of decisions. How long must we retain applicant data?": the data.)"""
    start = max(question.rfind(end, 0, at) for end in ".?!") + 1
    ends = [i for i in (question.find(end, at) for end in ".?!") if i >= 0]
    m = _KEEP.search(question[start : min(ends) if ends else len(question)])
    if m is None:
        return frozenset()
    name: list[str] = []
    for word in m.group("kept").split():
        if not content_terms(word):  # "the applicant data *we* collect", "copies *of* the declaration"
            break
        name.append(word)
    return frozenset(content_terms(" ".join(name)))


# "how much can the city *fine* us": the one who imposes the value, not whose value it is.
_IMPOSES = re.compile(r"\s+(?:fine|charge|penali[sz]e|sanction|bill|impose|levy|demand)\b", re.I)


# "how long does that take?", "how much does this cost?": "that" is the pronoun, the word after it the verb.
_VERB_AFTER_PRONOUN = frozenset(
    "take takes last lasts run runs get cost costs apply applies happen happens need work go".split()
)


# Words for anyone at all ("how much can a company be fined ...?"): every rule's value is a
# company's, so they tell no provision's value from another's.
_ANYONE = frozenset(
    "company companies business businesses firm firms organisation organization organisations organizations "
    "someone somebody anyone anybody entity entities".split()
)


_NO_SUBJECT = _VERB_AFTER_PRONOUN | _ANYONE


def _subject(question: str) -> str | None:
    m = _SUBJECT.search(question)
    if m is None or _IMPOSES.match(question, m.end()) or m.group(1).lower() in _NO_SUBJECT:
        return None
    terms = content_terms(m.group(1))
    return terms[0] if terms else None  # a pronoun ("it", "they") names no subject


# How a refusal names what the provisions lack ("They state no period or deadline for it.").
_KIND_NAMES = {
    "duration": "period or deadline",
    "money": "amount",
    "percentage": "percentage",
    "count": "number",
    "age": "age",
    "statistic": "average",
    "opinion": "opinion or sentiment",
    "date": "date",
    "moment": "time by which it is due",
}


def describe(asked: AskedValue) -> str:
    """What kind of value `asked` is, in words: the first kind of its first group ("average")."""
    return _KIND_NAMES[asked.kinds[0][0]]


# A number that names a provision, a list item or a category is not a count of anything.
_REFERENCE_BEFORE = re.compile(
    r"(?:\b(?:Articles?|Art\.|Annex(?:es)?|points?|paragraphs?|subparagraphs?|Chapters?|Sections?|No\.?|"
    r"Regulation|Directive|Decision|component|title|part|subdivision|item|level|Example|step|phase|tier)|§)\s*\(?$",
    re.I,
)


# An enumerator: "(1)" of a list or of a provision's number ("5-301(c)(1)", "Article 6(1)"), or "1." opening
# an item ("1. Such tool has been ...").
_ENUMERATOR = re.compile(r"\((\d+)\)|(?:^|[;:])\s*(\d+)\.\s")


def _states(kind: str, text: str) -> bool:
    pattern = _STATES[kind]
    if kind != "count":
        return pattern.search(text) is not None
    enumerators = {m.start(1) if m.group(1) else m.start(2) for m in _ENUMERATOR.finditer(text)}
    return any(
        m.start() not in enumerators and not _REFERENCE_BEFORE.search(text[max(0, m.start() - 16) : m.start()])
        for m in pattern.finditer(text)
    )


def states_value(text: str, asked: AskedValue) -> bool:
    """True when `text` states a value of every kind group `asked` needs."""
    return all(any(_states(kind, text) for kind in group) for group in asked.kinds)
