"""Position and pair-frequency effects (``ranking/estimators/position.py``): a planted left-side advantage is
recovered with an interval that covers it, the scores adjusted for it undo a lopsided showing of sides, the
side term is refused where the sides are confounded, and a pair shown far more often than the others is
weighted back to the balanced design's board."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import logit

from ranking.board_position import position_compute
from ranking.compute import Method
from ranking.estimators import TIE, aggregate_cells, fit_bradley_terry
from ranking.estimators import position as pos
from ranking.policy import VoteArrays, grouped_votes

THETA = np.array([0.6, 0.2, -0.1, -0.7])


def simulate(theta, n, h, seed, *, nu=None, left_share=None):  # type: ignore[no-untyped-def]
    """Votes with a left-side term h: half-win Bradley-Terry without ties, or Davidson with tie parameter
    ``nu``. ``left_share[i]``: how often competitor i is shown on the left (default: a coin flip)."""
    rng = np.random.default_rng(seed)
    k = len(theta)
    i = rng.integers(0, k, n)
    j = (i + rng.integers(1, k, n)) % k
    if left_share is None:
        first = rng.random(n) < 0.5
    else:
        first = rng.random(n) < left_share[i] / (left_share[i] + left_share[j])
    a, b = np.where(first, i, j), np.where(first, j, i)
    d = theta[a] - theta[b] + h
    if nu is None:
        return a, b, np.where(rng.random(n) < 1 / (1 + np.exp(-d)), 0, 1)
    w = np.stack([np.exp(d / 2), np.exp(-d / 2), np.full(n, nu)])
    w /= w.sum(axis=0)
    u = rng.random(n)
    return a, b, np.where(u < w[0], 0, np.where(u < w[0] + w[1], 1, 2))


def estimate(r: pos.PositionResult) -> tuple[float, float, float]:
    """``(h, lower, upper)`` of an estimable result with both sides closed."""
    assert r.estimable and r.reason is None and r.h is not None and r.lower is not None and r.upper is not None
    return r.h, r.lower, r.upper


def test_planted_left_bias_is_recovered_and_covered():
    hits = 0
    for seed in range(20):
        r = pos.fit_position(pos.oriented_counts(*simulate(THETA, 2000, 0.4, seed)))
        h, lower, upper = estimate(r)
        hits += lower < 0.4 < upper
        assert lower > 0  # detected: 0.4 is 70 score points, over four times its standard error here
    # 95% intervals: 19 of 20 expected; 16 or fewer has probability 1.6% under nominal coverage.
    assert hits >= 17
    assert abs(h - 0.4) < 0.15 and r.counts.wins_left > r.counts.wins_right


def test_planted_left_bias_under_davidson_ties():
    a, b, o = simulate(THETA, 3000, -0.3, 7, nu=0.6)
    assert (o == TIE).sum() > 500
    h, lower, upper = estimate(pos.fit_position(pos.oriented_counts(a, b, o), ties="davidson"))
    assert lower < -0.3 < upper < 0  # the right side favoured
    # Half a win each side dilutes the same votes' side effect (ties pull every d toward 0).
    half, _, _ = estimate(pos.fit_position(pos.oriented_counts(a, b, o), ties="half"))
    assert abs(half) < abs(h)


def test_adjusted_scores_undo_a_lopsided_showing_of_sides():
    """Competitor 0 is shown left 9 times in 10, competitor 3 right 9 times in 10: with raters favouring the
    left, the plain fit flatters 0 and sinks 3; the adjusted scores recover the true gaps."""
    truth = 400 / np.log(10) * (THETA - THETA.mean())
    a, b, o = simulate(THETA, 8000, 0.8, 3, left_share=np.array([9.0, 1.0, 1.0, 1 / 9]))
    r = pos.fit_position(pos.oriented_counts(a, b, o))
    assert r.scores_adjusted is not None and r.scores_plain is not None
    plain_err = np.abs((r.scores_plain - 1000) - truth)
    adjusted_err = np.abs((r.scores_adjusted - 1000) - truth)
    assert plain_err[0] > 40 and plain_err[3] > 40
    assert adjusted_err.max() < 20
    _, lower, upper = estimate(r)
    assert lower < 0.8 < upper


def test_two_competitors_shown_both_ways_match_the_closed_form():
    # A left vs B: 700 of 1000 to the left; B left vs A: 600 of 1000 to the left.
    # logit(0.7) = tA - tB + h, logit(0.6) = tB - tA + h, so h = (logit 0.7 + logit 0.6) / 2.
    a = np.array([0, 0, 1, 1])
    b = np.array([1, 1, 0, 0])
    o = np.array([0, 1, 0, 1])
    oc = pos.oriented_counts(a, b, o, count=[700, 300, 600, 400])
    r = pos.fit_position(oc, prior_games=1e-6)
    assert r.h == pytest.approx((logit(0.7) + logit(0.6)) / 2, abs=1e-4)
    gap = (r.scores_adjusted[0] - r.scores_adjusted[1]) / (400 / np.log(10))  # type: ignore[index]
    assert gap == pytest.approx((logit(0.7) - logit(0.6)) / 2, abs=1e-4)
    assert r.counts.pairs == 1 and r.counts.pairs_both_ways == 1 and r.counts.votes_in_pairs_both_ways == 2000


def test_sides_confounded_with_the_strengths_are_not_estimable():
    # Two competitors, always A on the left: h and tA - tB are one number.
    one_way = pos.oriented_counts([0] * 10, [1] * 10, [0] * 7 + [1] * 3)
    r = pos.fit_position(one_way)
    assert not r.estimable and r.reason == pos.CONFOUNDED_REASON and r.h is None and r.scores_adjusted is None
    # A chain 0 -> 1 -> 2, each pair one way: still confounded (phi = 0, -1, -2).
    assert pos.position_confounded(pos.oriented_counts([0, 1] * 5, [1, 2] * 5, [0, 1] * 5))
    # A cycle 0 -> 1 -> 2 -> 0 shown one way round identifies h: the three gaps sum to zero, the three
    # logits to 3h (closed form, the prior made negligible).
    a, b = np.array([0, 1, 2] * 2), np.array([1, 2, 0] * 2)
    counts = [800, 200, 700, 300, 900, 100]
    o = np.repeat([0, 1], 3)
    cyc = pos.oriented_counts(a, b, o, count=[counts[0], counts[2], counts[4], counts[1], counts[3], counts[5]])
    assert not pos.position_confounded(cyc)
    r = pos.fit_position(cyc, prior_games=1e-6)
    assert r.estimable and r.h == pytest.approx((logit(0.8) + logit(0.7) + logit(0.9)) / 3, abs=1e-4)


def test_all_ties_and_no_votes_are_not_estimable():
    ties = pos.oriented_counts([0, 1, 2, 1], [1, 0, 1, 2], [TIE] * 4)
    r = pos.fit_position(ties)
    assert not r.estimable and r.reason == pos.NO_DECISIVE_REASON and r.counts.ties == 4
    # Both-bad dropped: nothing is counted.
    assert pos.fit_position(pos.oriented_counts([0, 1], [1, 0], [3, 3], both_bad="drop")).reason == (
        "not estimable: no counted votes"
    )
    # All ties under the pair weights: every score at the centre, the weighted fit the unweighted one.
    f = pos.fit_pair_frequency(ties, shown=np.ones(3, dtype=bool))
    assert np.allclose(f.weighted.scores, 1000) and np.allclose(f.unweighted.scores, 1000)
    # The same under Davidson's tie rule (its tie parameter diverges without a decisive vote: the half-win fit,
    # whose scores are the same, rather than a singular matrix), and the board's blocks say which rule they used.
    f = pos.fit_pair_frequency(ties, shown=np.ones(3, dtype=bool), ties="davidson")
    assert np.allclose(f.weighted.scores, 1000) and np.allclose(f.unweighted.scores, 1000)
    ids = np.arange(11, 14, dtype=np.int64)
    votes = vote_arrays_of(np.array([0, 1, 2, 1] * 10), np.array([1, 0, 1, 2] * 10), np.full(40, TIE))
    position, frequency = position_compute(votes, ids, {}, Method(ties="davidson", min_votes=5))
    assert position["reason"] == pos.NO_DECISIVE_REASON and position["computed_from"]["ties"] == "half a win each side"
    assert frequency["available"] and {r["weighted"]["score"] for r in frequency["rows"]} == {1000.0}


def test_a_one_sided_side_record_has_an_open_side():
    # Every vote went to the left, in both orientations: the votes bound h from below only.
    r = pos.fit_position(pos.oriented_counts([0, 1] * 15, [1, 0] * 15, [0] * 30))
    assert r.estimable and r.upper is None and r.upper_open and not r.lower_open
    assert r.lower is not None and 0.5 < r.lower < r.h  # type: ignore[operator]


# --- Pair frequency -------------------------------------------------------------------------------------------

PAIRS = [(i, j) for i in range(4) for j in range(i + 1, 4)]


def pair_probabilities() -> np.ndarray:
    """Bradley-Terry, except that 0 beats 1 85% of the time (a pair-specific effect: 0 is good at exactly what
    1 is bad at), where the strengths alone say 55%."""
    theta = np.array([0.3, 0.1, -0.1, -0.3])
    p = 1 / (1 + np.exp(-(theta[:, None] - theta[None, :])))
    p[0, 1], p[1, 0] = 0.85, 0.15
    return p


def balanced_truth(p: np.ndarray) -> np.ndarray:
    """The board a balanced design converges to: Bradley-Terry fitted to every pair's probabilities with equal
    (large) counts."""
    a, b, o, c = [], [], [], []
    for i, j in PAIRS:
        wins = round(100_000 * p[i, j])
        a += [i, i]
        b += [j, j]
        o += [0, 1]
        c += [wins, 100_000 - wins]
    return fit_bradley_terry(aggregate_cells(a, b, o, count=c, n_competitors=4), prior_games=0).scores


def test_over_sampled_pair_is_weighted_back_to_the_balanced_board():
    p = pair_probabilities()
    truth = balanced_truth(p)
    rng = np.random.default_rng(11)
    a, b, o = [], [], []
    for i, j in PAIRS:
        m = 3000 if (i, j) == (0, 1) else 150  # the pair (0, 1) shown 20 times as often
        left = rng.random(m) < 0.5
        win = rng.random(m) < p[i, j]
        a.append(np.where(left, i, j))
        b.append(np.where(left, j, i))
        o.append(np.where(left == win, 0, 1))
    oc = pos.oriented_counts(np.concatenate(a), np.concatenate(b), np.concatenate(o))
    f = pos.fit_pair_frequency(oc, shown=np.ones(4, dtype=bool))
    # The unweighted board is pulled apart by the one pair: 0 too high, 1 too low, truth outside.
    assert f.unweighted.scores[0] - truth[0] > 50 and truth[1] - f.unweighted.scores[1] > 40
    assert not (f.unweighted.lower[0] < truth[0] < f.unweighted.upper[0])
    # The weighted board is near the balanced one, and its intervals (carrying the weights) cover it.
    assert np.abs(f.weighted.scores - truth).max() < 25
    assert np.all((f.weighted.lower < truth) & (truth < f.weighted.upper))
    # The over-sampled pair's competitors lose the precision their extra votes gave them.
    assert np.all((f.weighted.upper - f.weighted.lower)[:2] > (f.unweighted.upper - f.unweighted.lower)[:2])
    # The pair's votes weigh 1/20 of the others' (the weights of the votes sum to the votes).
    k = int(np.argmax(f.pair_count))
    assert (f.pair_lo[k], f.pair_hi[k]) == (0, 1) and f.pair_count[k] == 3000
    others = np.delete(f.pair_weight, k)
    assert np.allclose(others / f.pair_weight[k], 20) and f.pair_weight @ f.pair_count == pytest.approx(f.votes)
    assert f.effective_votes < f.votes and f.trimmed == 0


def test_weighted_fit_equals_the_balanced_design_exactly():
    """Counts in the same proportions, one pair 10 times as many: the weighted fit is the balanced fit."""
    p = pair_probabilities()
    rows = []
    for i, j in PAIRS:
        scale = 10 if (i, j) == (0, 1) else 1
        wins = round(200 * p[i, j])
        rows += [(i, j, 0, wins * scale), (i, j, 1, (200 - wins) * scale)]
    a, b, o, c = (np.array(col) for col in zip(*rows, strict=True))
    over = pos.fit_pair_frequency(pos.oriented_counts(a, b, o, count=c), shown=np.ones(4, dtype=bool), prior_games=1e-6)
    balanced_counts = np.where((a == 0) & (b == 1), c // 10, c)
    balanced = pos.fit_pair_frequency(
        pos.oriented_counts(a, b, o, count=balanced_counts), shown=np.ones(4, dtype=bool), prior_games=1e-6
    )
    assert np.allclose(balanced.pair_weight, 1.0)
    assert np.allclose(balanced.weighted.scores, balanced.unweighted.scores)
    assert np.allclose(over.weighted.scores, balanced.unweighted.scores, atol=1e-3)
    assert not np.allclose(over.unweighted.scores, balanced.unweighted.scores, atol=5)


def test_rare_pairs_are_trimmed_and_disconnected_groups_rank_apart():
    # Two groups that never met: {0, 1} and {2, 3}; the pair (2, 3) shown once against 100 for (0, 1).
    a = np.array([0] * 60 + [1] * 40 + [2])
    b = np.array([1] * 60 + [0] * 40 + [3])
    o = np.array([0] * 45 + [1] * 15 + [0] * 10 + [1] * 30 + [0])
    f = pos.fit_pair_frequency(pos.oriented_counts(a, b, o), shown=np.ones(4, dtype=bool))
    # Raw weights: 50.5 / 100 and 50.5 / 1, the second trimmed to WEIGHT_TRIM.
    assert f.trimmed == 1 and f.pair_weight[1] / f.pair_weight[0] == pytest.approx(pos.WEIGHT_TRIM / 0.505)
    assert len(set(f.components.tolist())) == 2
    # With 3 hidden (too few votes), its pair is not part of the balancing: it keeps the weight of a mean pair.
    hidden = pos.fit_pair_frequency(pos.oriented_counts(a, b, o), shown=np.array([True, True, True, False]))
    assert hidden.trimmed == 0 and hidden.pair_weight[0] == pytest.approx(hidden.pair_weight[1])
    for side in (f.weighted, f.unweighted):
        # Ranked within each group: 0 over 1 (75 of 100), and 2 first of its own group.
        assert (side.ranks.best[0], side.ranks.worst[1], side.ranks.best[2]) == (1, 2, 1)
        # The one-vote pair is one-sided: 2 beat 3, so 2's upper side and 3's lower side stay open.
        assert np.isposinf(side.upper[2]) and np.isneginf(side.lower[3])


# --- The board's blocks (ranking/board_position.py) -----------------------------------------------------------


def vote_arrays_of(a: np.ndarray, b: np.ndarray, o: np.ndarray) -> VoteArrays:
    m = a.shape[0]
    zero = np.zeros(m, dtype=np.int64)
    return VoteArrays(
        vote_id=np.arange(1, m + 1, dtype=np.int64),
        left=a + 11,
        right=b + 11,
        outcome=o.astype(np.int64),
        decision_ms=zero + 5000,
        rater=zero,
        prompt=zero,
        category=zero,
        categories=("",),
        identity=np.zeros(m, dtype=bool),
        style_left=np.zeros((m, 0)),
        style_right=np.zeros((m, 0)),
    )


def test_board_blocks_follow_the_method_read_grouped_rows_and_say_why_when_empty():
    a, b, o = simulate(THETA, 3000, 0.5, 5, nu=0.6)
    ids = np.arange(11, 15, dtype=np.int64)
    labels = {int(i): f"model <{i}>" for i in ids}
    method = Method(ties="davidson", min_votes=30)
    position, frequency = position_compute(vote_arrays_of(a, b, o), ids, labels, method)
    assert position["computed_from"] == {
        "view": "raw",
        "votes": 3000,
        "rows": "every counted vote of this board, grouped by (left, right, outcome): the sides as shown",
        "ties": "Davidson",
        "both_bad": "tie",
    }
    assert position["lower"] < 0.5 < position["upper"] and position["points"] == pytest.approx(
        position["h"] * 400 / np.log(10), abs=0.1
    )
    assert [r["competitor_id"] for r in frequency["rows"]] == [11, 12, 13, 14]  # the true order
    # The same votes grouped by (left, right, outcome), as the recompute reads them at scale: the same blocks.
    keys, first, count = np.unique(np.stack([a, b, o]), axis=1, return_index=True, return_counts=True)
    grouped = grouped_votes(
        np.zeros(keys.shape[1], dtype=np.int64),
        np.full(keys.shape[1], -1, dtype=np.int64),
        keys[0] + 11,
        keys[1] + 11,
        keys[2],
        count,
        first + 1,
        ("",),
    )
    assert position_compute(grouped, ids, labels, method) == (position, frequency)
    # One competitor, or no votes: each block says why instead of a number.
    none = vote_arrays_of(a[:0], b[:0], o[:0])
    empty_position, empty_frequency = position_compute(none, ids, labels, method)
    assert not empty_position["estimable"] and "no counted votes" in empty_position["reason"]
    assert not empty_frequency["available"] and "h" not in empty_position and "rows" not in empty_frequency
    assert empty_position["left_wins"] == empty_position["pairs"] == 0 and empty_position["left_share"] is None
