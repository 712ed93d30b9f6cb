"""The fair dual-streaming pacer (battles/pacing.py): property tests.

Times are whole milliseconds (as floats) with a 50 ms period, so every comparison the rule makes is
exact and "the same timeline" can be asserted with ==."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from battles.pacing import Frame, OnlinePacer, SideTimeline, pace

PERIOD = 50.0
WORD = st.text(alphabet="abcxyz*#`-", min_size=1, max_size=6)
SPACE = st.sampled_from([" ", "\n", "  ", "\n\n", "\t"])


def steady(words: list[str], first_ms: int, gap_ms: int) -> SideTimeline:
    """A steady writer: word i (with its trailing space) arrives at first + i * gap; the last word ends
    the answer."""
    arrivals = [(float(first_ms + i * gap_ms), w + ("" if i == len(words) - 1 else " ")) for i, w in enumerate(words)]
    return SideTimeline(tuple(arrivals), done=float(first_ms + (len(words) - 1) * gap_ms))


@st.composite
def timelines(draw: st.DrawFn) -> SideTimeline:
    """Any chunking of any text: deltas split words anywhere, whitespace anywhere, empty deltas."""
    pieces = draw(st.lists(st.one_of(WORD, SPACE, st.just("")), min_size=0, max_size=25))
    t = float(draw(st.integers(0, 500)))
    arrivals = []
    for piece in pieces:
        t += draw(st.integers(0, 120))
        arrivals.append((t, piece))
    done = t + draw(st.integers(0, 120))
    return SideTimeline(tuple(arrivals), done)


def _texts(frames: list[Frame], pacer: OnlinePacer) -> list[tuple[float, str, str]]:
    return [(f.t, pacer.text(0, f.units[0]), pacer.text(1, f.units[1])) for f in frames]


def _arrived_units(timeline: SideTimeline, t: float) -> int:
    """Units of the side whose text is known by ``t`` (a trailing word only once followed by space or
    the end)."""
    text = "".join(delta for at, delta in timeline.arrivals if at <= t)
    words = text.split()
    complete = timeline.done is not None and t >= timeline.done
    if words and not complete and not text[-1].isspace():
        return len(words) - 1
    return len(words)


@given(timelines(), timelines(), st.lists(st.integers(0, 4000), max_size=12))
def test_online_pacing_equals_offline(left: SideTimeline, right: SideTimeline, horizons: list[int]) -> None:
    offline, _ = pace(left, right, PERIOD)
    assert left.done is not None and right.done is not None
    events = sorted(
        [(t, 0, i, d, False) for i, (t, d) in enumerate(left.arrivals)]
        + [(left.done, 0, 10**6, "", True)]
        + [(t, 1, i, d, False) for i, (t, d) in enumerate(right.arrivals)]
        + [(right.done, 1, 10**6, "", True)],
        key=lambda e: (e[0], e[1], e[2]),
    )
    pacer = OnlinePacer(PERIOD)
    online: list[Frame] = []
    checkpoints = sorted(float(h) for h in horizons)
    for index, (t, side, _, delta, done) in enumerate(events):
        pacer.feed(side, t, delta, done)
        later = events[index + 1][0] if index + 1 < len(events) else math.inf
        # Any horizon is final once every event at or before it is fed: from t up to the next event's time.
        while checkpoints and checkpoints[0] < later:
            horizon = checkpoints.pop(0)
            if horizon >= t:
                online += pacer.advance(horizon)
        if later > t and later != math.inf:
            online += pacer.advance(later - 1)
    online += pacer.advance(math.inf)
    assert online == offline


@given(timelines(), timelines())
def test_frames_never_show_text_not_yet_arrived_and_end_with_both_full_texts(
    left: SideTimeline, right: SideTimeline
) -> None:
    frames, pacer = pace(left, right, PERIOD)
    assert frames and frames[-1].complete and sum(f.complete for f in frames) == 1
    last = frames[-1]
    assert pacer.text(0, last.units[0]) == "".join(d for _, d in left.arrivals)
    assert pacer.text(1, last.units[1]) == "".join(d for _, d in right.arrivals)
    previous = (0, 0)
    for frame in frames:
        for side, timeline in ((0, left), (1, right)):
            assert frame.units[side] <= _arrived_units(timeline, frame.t)
            shown = pacer.text(side, frame.units[side])
            assert "".join(d for _, d in timeline.arrivals).startswith(shown)
        assert frame.units[0] >= previous[0] and frame.units[1] >= previous[1]
        previous = frame.units
    # Nothing before both sides have something: the first frame is at the later first arrival.
    assert frames[0].t >= max(_first(left), _first(right))


def _first(timeline: SideTimeline) -> float:
    for t, _ in timeline.arrivals:
        if _arrived_units(timeline, t) > 0:
            return t
    assert timeline.done is not None
    return timeline.done


@given(timelines(), timelines())
def test_both_panes_show_their_first_word_in_the_same_frame(left: SideTimeline, right: SideTimeline) -> None:
    frames, _ = pace(left, right, PERIOD)
    n_left = len("".join(d for _, d in left.arrivals).split())
    n_right = len("".join(d for _, d in right.arrivals).split())
    first_visible = next(f for f in frames if f.units != (0, 0) or f.complete)
    assert (first_visible.units[0] > 0) == (n_left > 0)
    assert (first_visible.units[1] > 0) == (n_right > 0)


@given(
    st.lists(WORD, min_size=2, max_size=40),
    st.lists(WORD, min_size=2, max_size=40),
    st.tuples(st.integers(0, 800), st.integers(1, 200)),
    st.tuples(st.integers(0, 800), st.integers(1, 200)),
)
def test_swapping_the_models_speeds_gives_the_same_timeline(
    left_words: list[str], right_words: list[str], fast: tuple[int, int], slow: tuple[int, int]
) -> None:
    """The same two answers; once the left model has the first speed profile and the right the second,
    once the other way round. The rater sees exactly the same frames."""
    frames_1, pacer_1 = pace(steady(left_words, *fast), steady(right_words, *slow), PERIOD)
    frames_2, pacer_2 = pace(steady(left_words, *slow), steady(right_words, *fast), PERIOD)
    assert _texts(frames_1, pacer_1) == _texts(frames_2, pacer_2)


def test_the_fast_sides_longer_tail_is_paced_at_the_slow_sides_rate() -> None:
    """The price of the rule, in numbers: the fast model wrote 20 words in 190 ms, the slow one 5 in
    400 ms; the fast answer's 15 last words still come at one per 100 ms."""
    fast = steady([f"f{i}" for i in range(20)], 0, 10)
    slow = steady([f"s{i}" for i in range(5)], 0, 100)
    frames, _ = pace(fast, slow, PERIOD)
    assert frames[0].t == 0 and frames[0].units == (1, 1)
    at_slow_done = [f for f in frames if f.t <= 400][-1]
    assert at_slow_done.units == (5, 5)
    assert frames[-1].complete and frames[-1].t == 1900  # 20 words at the slow side's 100 ms a word
    # Had the slow model written the long answer, it would have ended at 1900 ms too.
    swapped, _ = pace(steady([f"f{i}" for i in range(20)], 0, 100), steady([f"s{i}" for i in range(5)], 0, 10))
    assert [(f.t, f.units) for f in swapped] == [(f.t, f.units) for f in frames]


def test_a_short_slow_side_ends_the_battle_at_its_own_end() -> None:
    """When the slower model's answer is the longer one, the battle ends with it: one tick at most."""
    fast = steady([f"f{i}" for i in range(5)], 0, 10)
    slow = steady([f"s{i}" for i in range(20)], 30, 100)
    frames, _ = pace(fast, slow, PERIOD)
    assert frames[-1].complete and 1930 <= frames[-1].t <= 1930 + PERIOD


def test_answers_that_arrive_whole_are_shown_together_at_the_later_one() -> None:
    frames, pacer = pace(SideTimeline(((120.0, "all of it"),), 120.0), SideTimeline(((700.0, "b b b"),), 700.0), PERIOD)
    assert frames == [Frame(700.0, (3, 3), True)]
    assert pacer.text(0, 3) == "all of it"


def test_an_empty_answer_does_not_hold_the_other_side_back() -> None:
    frames, _ = pace(SideTimeline((), 50.0), steady(["a", "b", "c"], 0, 40), PERIOD)
    assert frames[-1].complete and frames[-1].units == (0, 3)
    assert frames[0].t == 50.0


def test_no_word_is_shown_in_halves() -> None:
    pacer = OnlinePacer(PERIOD)
    pacer.feed(0, 0.0, "Hel")
    pacer.feed(1, 0.0, "One ")
    assert pacer.advance(10.0) == []  # the left side has no whole word yet
    pacer.feed(0, 20.0, "lo wor")
    frames = pacer.advance(60.0)
    assert [(f.t, f.units) for f in frames] == [(20.0, (1, 1))]
    assert pacer.text(0, 1) == "Hello" and pacer.text(1, 1) == "One"
