"""What `hypa feedback report` draws and writes: the plot (a real time axis, ratings by question type
and by reason) and the one-page HTML report (the plot embedded, the tables, the worst-rated answers).

The plot reads a FeedbackReview (core/feedback_review.py) and nothing else; the page embeds the PNG
as a data URI and has no scripts, style sheets or images from elsewhere, so it can be mailed or
attached to a ticket as one file.
"""
from __future__ import annotations

import base64
import html
import io
from datetime import date, datetime, timedelta
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from core.feedback_review import AnswerScore, FeedbackReview, Tally

UP_COLOR, DOWN_COLOR, NET_COLOR = "#2e7d32", "#c62828", "#212121"
MIN_DAYS_SHOWN = 7  # a report of one day still shows a week, so its bar does not fill the width


def report_figure(result: FeedbackReview) -> Figure:
    """Ratings per day on a date axis, under it ratings by question type and down-votes by reason.
    (Words, not 👍/👎, in the plot: matplotlib's fonts have no emoji.)"""
    # A bare Figure (Agg canvas) rather than pyplot: no global figure state, never a display.
    from matplotlib.figure import Figure

    panels = 2 + bool(result.by_reason)
    fig = Figure(figsize=(9, 3.6 * panels), dpi=110)
    axes = fig.subplots(panels, 1, gridspec_kw={"height_ratios": [1.4] + [1] * (panels - 1)})
    _per_day(axes[0], result)
    _by_key(axes[1], "By question type", result.by_question_type, show_up=True)
    if result.by_reason:
        _by_key(axes[2], "Down-votes by reason", result.by_reason, show_up=False)
    fig.tight_layout()
    return fig


def _per_day(ax, result: FeedbackReview) -> None:
    """Bars on the days themselves (a quiet day is a gap), over the whole period asked for."""
    import matplotlib.dates as mdates
    from matplotlib.ticker import MaxNLocator

    days = [d for d, _ in result.by_day]
    tallies = [t for _, t in result.by_day]
    x = [datetime.combine(d, datetime.min.time()) for d in days]
    ax.bar(x, [t.up for t in tallies], width=0.8, color=UP_COLOR, label="up")
    ax.bar(x, [-t.down for t in tallies], width=0.8, color=DOWN_COLOR, label="down")
    # Net as dots, not a line: a line would draw across the quiet days as if there were ratings.
    ax.plot(x, [t.net for t in tallies], color=NET_COLOR, marker="o", linestyle="none", label="net")
    first, last = _period(result, days)
    ax.set_xlim(datetime.combine(first, datetime.min.time()) - timedelta(hours=12),
                datetime.combine(last, datetime.min.time()) + timedelta(hours=12))
    locator = mdates.AutoDateLocator(minticks=3, maxticks=10)
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))
    ax.axhline(0, color="#9e9e9e", linewidth=0.8)
    share = result.up / result.ratings if result.ratings else 0.0
    ax.set_title(f"Answer ratings per day, UTC ({result.ratings} ratings, {share:.0%} up)")
    ax.set_ylabel("ratings (down below zero)")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.legend(loc="best")


def _period(result: FeedbackReview, days: list[date]) -> tuple[date, date]:
    first = result.first_day or (days[0] if days else date.today())
    last = result.last_day or (days[-1] if days else first)
    if (last - first).days + 1 < MIN_DAYS_SHOWN:
        first = last - timedelta(days=MIN_DAYS_SHOWN - 1)
    return first, last


def _by_key(ax, title: str, tallies: list[Tally], *, show_up: bool) -> None:
    """Horizontal bars, one row per key: up-votes right of zero and down-votes left of it, or (for
    down-votes alone) the down-votes to the right."""
    from matplotlib.ticker import MaxNLocator

    keys = [t.key for t in tallies][::-1]  # first key on top
    ys = list(range(len(keys)))
    downs = [t.down for t in tallies][::-1]
    if show_up:
        ax.barh(ys, [t.up for t in tallies][::-1], color=UP_COLOR, label="up")
        ax.barh(ys, [-d for d in downs], color=DOWN_COLOR, label="down")
        ax.axvline(0, color="#9e9e9e", linewidth=0.8)
    else:
        ax.barh(ys, downs, color=DOWN_COLOR, label="down")
    ax.set_yticks(ys, keys)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_title(title)
    if not keys:
        ax.text(0.5, 0.5, "none in this period", transform=ax.transAxes, ha="center", color="#757575")


def png_bytes(fig: Figure) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    return buffer.getvalue()


# --- the HTML page ----------------------------------------------------------------------------------

_CSS = """
body { font: 15px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 70em; padding: 0 1em; color: #212121; }
h1 { font-size: 1.5em; } h2 { font-size: 1.15em; margin-top: 2em; }
table { border-collapse: collapse; margin: .5em 0; } td, th { border-bottom: 1px solid #e0e0e0; padding: .3em .6em;
  text-align: left; vertical-align: top; } td.n { text-align: right; font-variant-numeric: tabular-nums; }
.up { color: #2e7d32; } .down { color: #c62828; } .muted { color: #757575; } code { font-size: .9em; }
.state { padding: .05em .4em; border-radius: .3em; background: #eeeeee; white-space: nowrap; }
.state-pending { background: #fff3e0; } .state-corrected { background: #e3f2fd; } .state-fine { background: #e8f5e9; }
img { max-width: 100%; }
"""


def render_html(result: FeedbackReview, png: bytes, *, period: str, generated: datetime) -> str:
    """One self-contained page: totals, the plot (a data URI), the tables and the worst-rated answers."""
    e = html.escape
    share = result.up / result.ratings if result.ratings else 0.0
    parts = [
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>hypa feedback report ({e(period)})</title><style>{_CSS}</style></head><body>",
        f"<h1>hypa feedback report <span class=muted>({e(period)})</span></h1>",
        f"<p><b>{result.ratings}</b> current ratings: <span class=up>{result.up} 👍</span> "
        f"<span class=down>{result.down} 👎</span> ({share:.0%} positive). "
        f"<span class=muted>Generated {e(generated.strftime('%Y-%m-%d %H:%M UTC'))}.</span></p>",
        f'<img alt="Ratings per day, by question type and by reason" '
        f'src="data:image/png;base64,{base64.b64encode(png).decode("ascii")}">',
        "<h2>Worst-rated answers</h2>",
        _worst_table(result.worst) if result.worst else "<p>No 👎 ratings in this period.</p>",
    ]
    if result.by_reason:
        parts += ["<h2>👎 by reason</h2>", _tally_table("reason", result.by_reason)]
    parts += [
        "<h2>By question type</h2>", _tally_table("type", result.by_question_type),
        "<h2>By complexity (retrieval config: label)</h2>", _tally_table("complexity", result.by_complexity),
        "<h2>Ratings per day (UTC)</h2>", _tally_table("day", [t for _, t in result.by_day]),
        "</body></html>",
    ]
    return "\n".join(parts) + "\n"


def _tally_table(first: str, tallies: list[Tally]) -> str:
    rows = "".join(
        f"<tr><td>{html.escape(t.key)}</td><td class=n>{t.answers}</td><td class=n>{t.up}</td>"
        f"<td class=n>{t.down}</td><td class=n>{t.net:+d}</td><td class=n>{t.share_up:.0%}</td></tr>"
        for t in tallies
    )
    head = "".join(f"<th>{h}</th>" for h in (html.escape(first), "answers", "👍", "👎", "net", "% 👍"))
    return f"<table><tr>{head}</tr>{rows}</table>"


def _worst_table(worst: list[AnswerScore]) -> str:
    head = ["net", "👍/👎", "question and answer", "sources", "reasons", "review", "answer id"]
    rows = [f"<tr>{''.join(f'<th>{h}</th>' for h in head)}</tr>"]
    for s in worst:
        record = s.answer.record
        cells = [
            f"<td class=n>{s.net:+d}</td>",
            f"<td class=n>{s.up}/{s.down}</td>",
            f"<td><b>{html.escape(record.question)}</b><br>{html.escape(record.text)}</td>",
            f"<td>{_sources(record.citations)}</td>",
            f"<td>{_reasons(s)}</td>",
        ]
        state = s.review_state
        cells.append(f"<td><span class='state state-{html.escape(state)}'>{html.escape(state or 'not asked')}</span></td>")
        cells.append(f"<td><code>{html.escape(s.answer.id)}</code></td>")
        rows.append(f"<tr>{''.join(cells)}</tr>")
    return f"<table>{''.join(rows)}</table>"


def _sources(citations) -> str:
    """Each cited provision, as a link to its official text where it has one."""
    items = []
    for c in citations:
        label = html.escape(f"[{c.n}] {c.label}")
        url = getattr(c, "url", "")
        items.append(f'<a href="{html.escape(url, quote=True)}">{label}</a>' if url else label)
    return "<br>".join(dict.fromkeys(items)) or "—"


def _reasons(score: AnswerScore) -> str:
    """Each reason as its kind's label and the rater's words ("Incomplete: misses agencies")."""
    return "<br>".join(html.escape(r) for r in dict.fromkeys(score.reasons)) or "<span class=muted>none given</span>"
