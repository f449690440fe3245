"""Provision identifiers: from citation labels, and from the cross-references written in the text.

Keys are short and shared by both sources, so "§ 20-871(b)(1) of the Code" in a rule and the
chunk labelled "Admin. Code § 20-871(b)" meet in one graph: `§ 20-871(b)(1)` is part of
`§ 20-871(b)`, which is part of `§ 20-871`. External provisions get a qualifier
("42 U.S.C. § 2000e-8(c)", "29 CFR § 1602.7", "NYC Charter § 1043").
"""
from __future__ import annotations

import re
from dataclasses import dataclass

_SUB = r"\([A-Za-z0-9]{1,4}\)"
_SECTION_NO = r"\d+[A-Za-z]?(?:-\d+[A-Za-z]?)+|\d+\.\d+"
_LABEL_SECTION = re.compile(rf"§+\s*(?P<no>{_SECTION_NO}|\d+)(?P<subs>(?:{_SUB})*)(?:\s*[–-]\s*(?P<last>{_SUB}))?")
_LABEL_ARTICLE = re.compile(rf"\bArt(?:icle)?\.?\s*(?P<no>\d+[a-z]?)(?P<subs>(?:{_SUB})*)(?:\s*[–-]\s*(?P<last>{_SUB}))?")
_LABEL_ANNEX = re.compile(r"\bAnnex\s+(?P<no>[IVXLC]+)\b")


@dataclass(frozen=True)
class Reference:
    """One provision a sentence refers to: its key, the words that refer to it, and how."""

    key: str
    text: str
    how: str  # "defined by", "pursuant to", "to comply with", "notwithstanding", "refers to"


def _subs(text: str) -> list[str]:
    return re.findall(r"\(([A-Za-z0-9]{1,4})\)", text or "")


def _key(base: str, subs: list[str]) -> str:
    return base + "".join(f"({s})" for s in subs)


def label_provisions(label: str) -> list[str]:
    """Provision keys a chunk label covers: "Admin. Code § 20-872(b)–(c)" -> [§ 20-872(b), § 20-872(c)].

    Empty for labels that name no numbered provision (a notice, a page)."""
    for pattern, prefix in ((_LABEL_SECTION, "§ "), (_LABEL_ARTICLE, "Art. ")):
        m = pattern.search(label)
        if not m:
            continue
        no = m.group("no")
        # A bare number ("Int. No. 1894-A § 1") names a section of that document only: keep its prefix.
        base = prefix + no if not no.isdigit() or prefix != "§ " else collapse_label(label[: m.start()]) + " § " + no
        subs = _subs(m.group("subs"))
        keys = [_key(base, subs)]
        last = m.group("last")
        if last and subs:
            first, end = subs[-1], _subs(last)[0]
            keys = [_key(base, [*subs[:-1], s]) for s in _letter_range(first, end)]
        return keys
    m = _LABEL_ANNEX.search(label)
    return [f"Annex {m.group('no')}"] if m else []


def collapse_label(text: str) -> str:
    return " ".join(text.split()).strip(" ,")


def _letter_range(first: str, last: str) -> list[str]:
    if first.isdigit() and last.isdigit() and int(first) <= int(last):
        return [str(i) for i in range(int(first), int(last) + 1)]
    if len(first) == 1 and len(last) == 1 and first.isalpha() and last.isalpha() and first <= last:
        return [chr(c) for c in range(ord(first), ord(last) + 1)]
    return [first, last]


def parent(key: str) -> str | None:
    """`§ 20-871(b)(1)` -> `§ 20-871(b)` -> `§ 20-871` -> None."""
    m = re.match(r"^(.*)\([A-Za-z0-9]{1,4}\)$", key)
    return m.group(1) if m else None


def lineage(key: str) -> list[str]:
    """The key and its ancestors, most specific first."""
    out = [key]
    while (p := parent(out[-1])) is not None:
        out.append(p)
    return out


# --- cross-references in running text ------------------------------------------------------------

_ITEM = r"\(?[A-Za-z0-9]{1,4}\)?"
_ITEMS = rf"{_ITEM}(?:\s*(?:,|and|or|, and|, or)\s*{_ITEM})*"
_HOW = (
    r"(?P<how>(?i:as defined (?:by|in)|defined (?:by|in)|pursuant to|to comply with|comply with|notwithstanding"
    r"|in violation of|under|required by|in accordance with))?\s*"
)
_QUALIFIER = (
    r"(?:\s+of\s+(?:the\s+)?(?P<q_code>Code|Administrative Code|New York City Administrative Code|"
    r"New York City Charter|Charter|this Chapter|this chapter)"
    r"|\s+of\s+title\s+(?P<q_title>\d+)\s+of\s+the\s+(?P<q_body>United States [Cc]ode|[Cc]ode of [Ff]ederal [Rr]egulations))?"
)
# "§ 20-871(b)(1) and (2) of the Code", "section 5-301 of this Chapter", "6 RCNY § 5-249",
# "Sections 1043 and 2203(f) of the New York City Charter", "29 C.F.R. § 1607.4".
_SECTION_REF = re.compile(
    _HOW
    + r"(?P<prefix>\d+\s+(?:RCNY|C\.?F\.?R\.?|U\.?S\.?C\.?)\s*)?"
    + rf"(?:§§?|[Ss]ections?|[Ss]ec\.)\s*(?P<no>{_SECTION_NO}|\d+)(?P<subs>(?:{_SUB})*)"
    + rf"(?P<more>(?:\s*(?:,|and|or|, and|, or)\s*(?:{_SUB}|\d+(?:{_SUB})*)(?!\s*(?:business|days|months|years|%)))*)"
    + _QUALIFIER
)
# "paragraphs 1, 2 or 3 of subdivision b of section 20-871", "subdivision a of section 20-871",
# "subdivision (a) of this section", "paragraphs (2) and (3) of subdivision (b)",
# "subsection (c) of section 2000e-8 of title 42 of the United States code".
_UNIT_REF = re.compile(
    _HOW
    + rf"(?:(?:paragraphs?|clauses?|points?)\s+(?P<para>{_ITEMS})\s+of\s+)?"
    + rf"(?:(?:subdivisions?|subsections?)\s+(?P<div>{_ITEM})|this subdivision)"
    + r"(?:\s+of\s+(?:section\s+(?P<no>" + _SECTION_NO + r")|(?P<this>this section)))?"
    + _QUALIFIER
)
_PARA_OF_THIS = re.compile(_HOW + rf"(?:paragraphs?)\s+(?P<para>{_ITEMS})\s+of\s+this\s+subdivision")
_PART_REF = re.compile(
    _HOW + r"part\s+(?P<no>\d+\.\d+)\s+of\s+title\s+(?P<title>\d+)\s+of\s+the\s+[Cc]ode\s+of\s+[Ff]ederal\s+[Rr]egulations"
)
_ARTICLE_REF = re.compile(
    _HOW + rf"(?:point\s+\((?P<point>[a-z])\)\s+of\s+)?Articles?\s+(?P<no>\d+[a-z]?)(?P<subs>(?:{_SUB})*)"
    rf"(?P<more>(?:\s*(?:,|and|or)\s*\d+[a-z]?(?:{_SUB})*)*)"
)
_ANNEX_REF = re.compile(_HOW + r"Annex(?:es)?\s+(?P<no>[IVXLC]+)\b")
_TITLE_REF = re.compile(
    _HOW
    + r"(?:[Cc]hapter\s+(?P<chapter>\d+)\s+of\s+)?[Tt]itle\s+(?P<no>\d+)\b(?!\s+of\s+the\s+(?:United States|[Cc]ode of [Ff]ed))"
    r"(?:\s+of\s+the\s+(?P<body>[Rr]ules of the [Cc]ity of New York|[Aa]dministrative [Cc]ode))?"
)


def _items(text: str) -> list[str]:
    return [s.strip("()") for s in re.findall(r"\(?[A-Za-z0-9]{1,4}\)?", text or "") if s.strip("()") not in ("and", "or")]


def _how(m: re.Match) -> str:
    how = (m.group("how") or "").strip().lower()
    if "defined" in how:
        return "defined by"
    if "comply" in how:
        return "to comply with"
    return how or "refers to"


def _qualified(base_no: str, m: re.Match, prefix: str | None = None) -> str:
    groups = m.groupdict()
    if groups.get("q_body"):
        body = "U.S.C." if "united" in groups["q_body"].lower() else "CFR"
        return f"{groups['q_title']} {body} § {base_no}"
    code = (groups.get("q_code") or "").lower()
    if "charter" in code:
        return f"NYC Charter § {base_no}"
    if prefix:
        p = prefix.upper().replace(".", "").replace(" ", "")
        if "CFR" in p or "USC" in p:
            title = re.match(r"\d+", prefix.strip())
            body = "CFR" if "CFR" in p else "U.S.C."
            return f"{title.group(0) if title else ''} {body} § {base_no}".strip()
    return f"§ {base_no}"


def find_references(text: str, here: str | None = None) -> list[Reference]:
    """Every provision `text` refers to, as keys. `here` is the key of the provision the text is
    in (e.g. `§ 5-302(b)`), used to resolve "this section" and "this subdivision"."""
    here_section = _section_of(here)
    here_div = _division_of(here)
    out: list[Reference] = []
    taken: list[tuple[int, int]] = []

    ancestors = set(lineage(here)) if here else set()

    def add(key: str, m: re.Match, how: str) -> None:
        if key in ancestors:  # the provision's own heading ("§ 20-871 Requirements ...")
            return
        out.append(Reference(key=key, text=m.group(0).strip(), how=how))

    for m in _UNIT_REF.finditer(text):
        if m.group("no"):
            base = f"§ {m.group('no')}"
            base = _qualified(m.group("no"), m) if (m.group("q_body") or m.group("q_code")) else base
        elif here_section:
            base = here_section
        else:
            continue
        if m.group("div"):
            divs = [m.group("div").strip("()")]
        elif here_div:
            divs = [here_div]
        else:
            continue
        paras = _items(m.group("para")) if m.group("para") else [None]
        for div in divs:
            for para in paras:
                add(_key(base, [div] + ([para] if para else [])), m, _how(m))
        taken.append(m.span())
    for m in _PARA_OF_THIS.finditer(text):
        if _inside(m.span(), taken) or not (here_section and here_div):
            continue
        for para in _items(m.group("para")):
            add(_key(here_section, [here_div, para]), m, _how(m))
        taken.append(m.span())
    for m in _SECTION_REF.finditer(text):
        if _inside(m.span(), taken):
            continue
        no = m.group("no")
        plain_number = "-" not in no and "." not in no
        if plain_number and not (m.group("q_code") and "charter" in (m.group("q_code") or "").lower()):
            continue  # "Section 1." of an enacting bill is a heading, not a reference
        base = _qualified(no, m, m.group("prefix"))
        subs = _subs(m.group("subs"))
        add(_key(base, subs), m, _how(m))
        for extra in re.findall(rf"(\d+(?:{_SUB})*|{_SUB})", m.group("more") or ""):
            if extra.startswith("("):  # "(b)(1) and (2)": replaces the last subdivision
                more = [*subs[:-1], *_subs(extra)] if subs else _subs(extra)
                add(_key(base, more), m, _how(m))
            else:  # "Sections 1043 and 2203(f)"
                num = extra[: len(extra) - len(extra.lstrip("0123456789"))]  # its leading digits
                add(_key(_qualified(num, m, m.group("prefix")), _subs(extra)), m, _how(m))
        taken.append(m.span())
    for m in _PART_REF.finditer(text):
        add(f"{m.group('title')} CFR § {m.group('no')}", m, _how(m))
    for m in _ARTICLE_REF.finditer(text):
        subs = _subs(m.group("subs")) + ([m.group("point")] if m.group("point") else [])
        add(_key(f"Art. {m.group('no')}", subs), m, _how(m))
        for extra in re.findall(rf"\d+[a-z]?(?:{_SUB})*", m.group("more") or ""):
            num = re.match(r"\d+[a-z]?", extra).group(0)  # type: ignore[union-attr]  # findall matched this
            add(_key(f"Art. {num}", _subs(extra)), m, _how(m))
    for m in _ANNEX_REF.finditer(text):
        add(f"Annex {m.group('no')}", m, _how(m))
    for m in _TITLE_REF.finditer(text):
        body = (m.group("body") or "").lower()
        base = f"{m.group('no')} RCNY" if "rules" in body else f"Admin. Code title {m.group('no')}"
        add(base + (f" chapter {m.group('chapter')}" if m.group("chapter") else ""), m, _how(m))
    return _unique(out)


def _inside(span: tuple[int, int], taken: list[tuple[int, int]]) -> bool:
    return any(a <= span[0] < b or a < span[1] <= b for a, b in taken)


def _unique(refs: list[Reference]) -> list[Reference]:
    seen: set[str] = set()
    out = []
    for r in refs:
        if r.key not in seen:
            seen.add(r.key)
            out.append(r)
    return out


def _section_of(key: str | None) -> str | None:
    if not key:
        return None
    return lineage(key)[-1]


def _division_of(key: str | None) -> str | None:
    """The first subdivision of a key: `§ 5-301(b)(2)` -> `b`."""
    if not key:
        return None
    subs = _subs(key[len(lineage(key)[-1]) :])
    return subs[0] if subs else None
