"""A rater's current rating of an answer: their rating acts, applied in the order they made them.

Platforms deliver acts concurrently and out of order (a reaction's removal processed before the
reaction, a click before the reaction that preceded it), so the current rating is not "the last act
processed" but the fold of every act of that rater over that answer, sorted by the platform's own
clock — one clock per platform, so acts of different kinds compare: Slack's `event_ts` / `action_ts`
(microseconds since the epoch), Telegram's `update_id` (one increasing sequence per bot, for button
presses and reactions alike), the local clock for the terminal. Processing the same acts in any
order gives the same rating.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class RatingAct:
    rating: int  # +1 / -1; 0 removes
    order: int  # position on the platform's clock
    at: datetime  # when it happened (for reports)
    source: str = "button"
    reason: str = ""
    reason_kind: str = ""  # the choice the reason was given with (core/review.py)
    # A reaction taken away withdraws the rating it gave: only if that rating is still the current one.
    withdraws: int | None = None


@dataclass(frozen=True)
class RatingState:
    rating: int = 0
    reason: str = ""
    reason_kind: str = ""
    source: str = ""
    at: datetime | None = None  # the time of the latest act that set or repeated this state


def fold(acts: Iterable[RatingAct]) -> RatingState:
    """The rating the acts leave when applied in platform order (ties: in the order given)."""
    state = RatingState()
    for act in sorted(acts, key=lambda a: a.order):
        if act.rating != 0:
            if act.rating != state.rating:
                state = RatingState(act.rating, act.reason, act.reason_kind, act.source, act.at)
            elif act.reason or act.reason_kind:  # the same rating again, with a new reason: it replaces the old one
                state = replace(state, reason=act.reason, reason_kind=act.reason_kind, source=act.source, at=act.at)
            else:  # the same rating again: the latest act, the reason stays
                state = replace(state, source=act.source, at=act.at)
        elif act.withdraws is None or act.withdraws == state.rating:
            state = RatingState(0, "", "", act.source, act.at)
        # else: a reaction removed after a newer act replaced its rating: nothing changes
    return state


def order_from_time(at: datetime) -> int:
    """Microseconds since the epoch: the order of an act timed by a clock (the terminal's, or a
    platform timestamp that was missing)."""
    at = at.replace(tzinfo=UTC) if at.tzinfo is None else at
    return (at - _EPOCH) // timedelta(microseconds=1)
