"""Fair dual streaming: what each pane of a live battle shows, and when, from the two arrival timelines.

Pure and deterministic (no Django, no clock): the same arrivals give the same frames, whether they are
paced offline (``pace``) or as they come in (``OnlinePacer``), so a reader that starts again from the
stored events replays the same timeline.

The rule (what the rater sees must not tell which model was faster):

- A *unit* is a whitespace-delimited word. A unit has *arrived* on a side once the text after it has
  arrived too (whitespace) or the side is complete, so a pane never shows half a word: a half word at
  the end of one pane and whole words in the other would point at the slower side.
- Nothing is shown until both sides have a first unit (or finished empty): ``t0`` is the later of the
  two first arrivals. From then on, at ticks ``t0 + j * period``, both panes show the first ``k(t)``
  units of their answer (or all of it when it is shorter), with ``k(t) = min_s A_s(t)``:
  ``A_s(t)`` is the number of units that have arrived on side ``s`` by ``t``; once ``s`` is complete
  it is extrapolated at ``s``'s own observed rate, ``n + (t - c_n) * (n - 1) / (c_n - c_1)`` (``c_i``
  the arrival of unit ``i``), which is what ``s`` would have delivered had it gone on writing. A
  completed fast side therefore never lets the slower one run ahead at the fast side's speed, and a
  longer answer of the fast side is shown at the slow side's pace to its end: swapping which model is
  slow changes nothing the rater sees.
- A side whose whole answer came at once (one unit, or every unit in one chunk) or that finished empty
  has no rate to extrapolate: once complete it no longer holds the other side back.
- The frame at which both sides are complete and both panes show everything is the last.

Why ``(n - 1) / (c_n - c_1)`` and not ``n / (done - first)``: the latter overestimates a steady
writer's rate by ``n / (n - 1)`` and depends on the answer's length, so two models of the same speed
with answers of different lengths would be extrapolated at different rates and a speed swap would move
the timeline. The mean gap between unit arrivals is exact for a steady writer, whatever the length.
"""

from __future__ import annotations

import bisect
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

__all__ = ["DEFAULT_PERIOD", "Frame", "OnlinePacer", "SideTimeline", "pace"]

DEFAULT_PERIOD = 0.05  # seconds between frames: 20 frames a second, what a reader perceives as smooth
_UNIT = re.compile(r"\S+")
LEFT, RIGHT = 0, 1


@dataclass(frozen=True)
class Frame:
    """What both panes show from time ``t`` on: ``units[s]`` words of side ``s``; ``complete``: the last
    frame, both full texts."""

    t: float
    units: tuple[int, int]
    complete: bool = False


@dataclass(frozen=True)
class SideTimeline:
    """One side's arrivals ``(t, delta)`` in order, and when it completed (None: still writing)."""

    arrivals: tuple[tuple[float, str], ...]
    done: float | None = None


@dataclass
class _Side:
    text: str = ""
    ends: list[int] = field(default_factory=list)  # end offset of each arrived unit
    times: list[float] = field(default_factory=list)  # when each unit arrived
    scan: int = 0
    done: float | None = None

    def feed(self, t: float, delta: str, done: bool) -> None:
        if self.done is not None:
            raise ValueError("an arrival after the side completed")
        self.text += delta
        for match in _UNIT.finditer(self.text, self.scan):
            if match.end() == len(self.text) and not done:
                break  # the word may go on in the next delta
            self.ends.append(match.end())
            self.times.append(t)
            self.scan = match.end()
        if done:
            self.done = t

    @property
    def first(self) -> float | None:
        if self.times:
            return self.times[0]
        return self.done  # finished empty: nothing to wait for

    def arrived(self, t: float) -> float:
        """A_s(t): units arrived by ``t``, extrapolated at the side's own rate once it is complete."""
        if self.done is None or t < self.done:
            return bisect.bisect_right(self.times, t)
        n = len(self.times)
        if n < 2 or self.times[-1] <= self.times[0]:
            return math.inf
        return n + math.floor((t - self.times[-1]) * (n - 1) / (self.times[-1] - self.times[0]))

    def visible(self, units: int) -> str:
        if self.done is not None and units >= len(self.ends):
            return self.text
        return self.text[: self.ends[units - 1]] if units > 0 else ""


class OnlinePacer:
    """The rule of this module, fed as events arrive.

    ``feed`` each arrival in time order; ``advance(horizon)`` returns the frames up to ``horizon``,
    which the caller promises is final: every arrival at or before it has been fed (a live reader
    passes the time of the last event it has read, since events are published in time order). Once
    both sides are complete any horizon is final, and the caller passes the present (on the same clock)
    so that the rest is paced in real time. Only frames that change what a pane shows are returned,
    and the complete frame, after which nothing more comes."""

    def __init__(self, period: float = DEFAULT_PERIOD) -> None:
        if not period > 0:
            raise ValueError("period must be positive")
        self.period = period
        self._sides = (_Side(), _Side())
        self._tick = 0
        self._shown: tuple[int, int] = (0, 0)
        self.finished = False
        self.last: Frame | None = None  # the last frame returned

    def feed(self, side: int, t: float, delta: str, done: bool = False) -> None:
        self._sides[side].feed(t, delta, done)

    @property
    def start(self) -> float | None:
        """``t0``: when both sides have a first unit (None: not yet)."""
        firsts = [s.first for s in self._sides]
        if firsts[0] is None or firsts[1] is None:
            return None
        return max(firsts[0], firsts[1])

    @property
    def next_time(self) -> float | None:
        """When the next frame is due (None: not started, or finished)."""
        t0 = self.start
        if t0 is None or self.finished:
            return None
        return t0 + self._tick * self.period

    @property
    def all_done(self) -> bool:
        return all(s.done is not None for s in self._sides)

    def text(self, side: int, units: int) -> str:
        """The text a pane shows at ``units`` (the full text once the side is complete and all shown)."""
        return self._sides[side].visible(units)

    def full_text(self, side: int) -> str:
        return self._sides[side].text

    def frame_at(self, t: float) -> Frame:
        left, right = self._sides
        k = min(left.arrived(t), right.arrived(t))
        units = (int(min(k, len(left.ends))), int(min(k, len(right.ends))))
        complete = (
            left.done is not None
            and right.done is not None
            and t >= max(left.done, right.done)
            and units == (len(left.ends), len(right.ends))
        )
        return Frame(t, units, complete)

    def advance(self, horizon: float) -> list[Frame]:
        t0 = self.start
        frames: list[Frame] = []
        if t0 is None or self.finished:
            return frames
        if math.isinf(horizon) and not self.all_done:
            raise ValueError("an unbounded horizon needs both sides complete")
        while True:
            t = t0 + self._tick * self.period  # multiplied, not summed: no drift, the same ticks every run
            if t > horizon:
                return frames
            self._tick += 1
            frame = self.frame_at(t)
            if frame.units != self._shown or frame.complete or self.last is None:
                frames.append(frame)
                self._shown = frame.units
                self.last = frame
            if frame.complete:
                self.finished = True
                return frames


def _merged(timelines: Sequence[SideTimeline]) -> Iterable[tuple[float, int, str, bool]]:
    events: list[tuple[float, int, int, str, bool]] = []
    for side, timeline in enumerate(timelines):
        for index, (t, delta) in enumerate(timeline.arrivals):
            events.append((t, side, index, delta, False))
        if timeline.done is not None:
            events.append((timeline.done, side, len(timeline.arrivals), "", True))
    events.sort(key=lambda e: (e[0], e[1], e[2]))
    return ((t, side, delta, done) for t, side, _, delta, done in events)


def pace(left: SideTimeline, right: SideTimeline, period: float = DEFAULT_PERIOD) -> tuple[list[Frame], OnlinePacer]:
    """The frames of a whole battle (both sides complete), and the pacer that holds the texts."""
    if left.done is None or right.done is None:
        raise ValueError("offline pacing needs both sides complete")
    pacer = OnlinePacer(period)
    for t, side, delta, done in _merged((left, right)):
        pacer.feed(side, t, delta, done)
    return pacer.advance(math.inf), pacer
