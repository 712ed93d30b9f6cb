"""The outlier-rater e-process: validity for honest raters, power against random and adversarial
voters, edge cases; gold accuracy with Wilson intervals."""

from __future__ import annotations

import numpy as np
import pytest
from numpy.typing import NDArray

from ranking.estimators import BOTH_BAD, LEFT_WINS, RIGHT_WINS, TIE
from ranking.estimators.rater_outliers import (
    EPSILONS,
    gold_accuracy,
    log_factors,
    rater_outliers,
    shrunk_consensus,
)

Votes = tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]]


def _campaign(
    rng: np.random.Generator, n_competitors: int, kinds: list[str], votes_each: int, tie_rate: float = 0.2
) -> Votes:
    """Raters of each kind vote on random pairs of competitors with Bradley-Terry strengths (sd 1 in
    logits); the log interleaves everyone's votes at random. Honest raters vote with the BT
    probability (ties at ``tie_rate``), random ones flip a coin (ties too), adversaries always pick
    the weaker side."""
    theta = rng.normal(0.0, 1.0, n_competitors)
    rater, left, right, outcome = [], [], [], []
    for index, kind in enumerate(kinds):
        a = rng.integers(0, n_competitors, votes_each)
        b = (a + rng.integers(1, n_competitors, votes_each)) % n_competitors
        p_left = 1.0 / (1.0 + np.exp(-(theta[a] - theta[b])))
        if kind == "honest":
            left_won = rng.random(votes_each) < p_left
        elif kind == "random":
            left_won = rng.random(votes_each) < 0.5
        else:
            left_won = p_left < 0.5
        o = np.where(left_won, LEFT_WINS, RIGHT_WINS)
        if kind != "adversary":
            o = np.where(rng.random(votes_each) < tie_rate, TIE, o)
        rater.append(np.full(votes_each, index))
        left.append(a)
        right.append(b)
        outcome.append(o)
    perm = rng.permutation(len(kinds) * votes_each)
    return (
        np.concatenate(rater)[perm],
        np.concatenate(left)[perm],
        np.concatenate(right)[perm],
        np.concatenate(outcome)[perm],
    )


def test_each_factor_is_a_valid_e_value_when_the_consensus_is_shrunk() -> None:
    # E[e] = p* e(x=1) + (1 - p*) e(x=0): exactly 1 at p = p*, at most 1 for p between 1/2 and p*.
    for p_true in (0.1, 0.3, 0.5, 0.55, 0.8, 0.95):
        for p in np.linspace(0.5, p_true, 7):
            factors = np.exp(log_factors(np.array([p, p]), np.array([1.0, 0.0])))
            mean = p_true * factors[:, 0] + (1 - p_true) * factors[:, 1]
            assert np.all(mean <= 1 + 1e-12)
            if p == pytest.approx(p_true):
                assert mean == pytest.approx(np.ones(len(EPSILONS)))
            assert np.all(factors >= 0.1 - 1e-12)  # eps <= 0.9 keeps every factor >= 0.1
    # A tie scored 1/2 keeps the factor non-negative.
    assert np.all(np.exp(log_factors(np.array([0.95]), np.array([0.5]))) > 0)
    # No consensus (p = 1/2): no evidence.
    assert log_factors(np.array([0.5]), np.array([0.0])).tolist() == [[0.0]] * len(EPSILONS)


def test_the_consensus_is_shrunk_toward_one_half_never_past_it() -> None:
    p = shrunk_consensus([0, 3, 10, 990, 500], [0, 3, 10, 1000, 1000])
    assert p[0] == 0.5  # no votes
    assert 0.5 <= p[1] < (3 + 2) / (3 + 4)  # thin: pulled toward 1/2
    assert p[3] == 0.95  # capped
    assert p[4] == 0.5  # an even pair stays even
    assert shrunk_consensus([0], [10])[0] > 0.05  # symmetric below 1/2


def test_honest_raters_are_flagged_at_most_at_rate_alpha() -> None:
    rng = np.random.default_rng(20261201)
    result = rater_outliers(*_campaign(rng, 20, ["honest"] * 1000, 200), alpha=0.01)
    assert result.n_votes.tolist() == [200] * 1000
    assert np.median(result.n_informative) > 100
    assert result.flagged.mean() <= 0.01 + 0.01


def test_honest_raters_on_thin_pairs_are_flagged_at_most_at_rate_alpha() -> None:
    # 60 competitors, 1770 pairs, about 17 votes a pair: the consensus is estimated from few votes.
    rng = np.random.default_rng(5)
    result = rater_outliers(*_campaign(rng, 60, ["honest"] * 300, 100), alpha=0.01)
    assert result.flagged.mean() <= 0.01 + 0.01
    half = rater_outliers(*_campaign(rng, 60, ["honest"] * 300, 100), alpha=0.01, ties="half")
    assert half.flagged.mean() <= 0.01 + 0.01


def test_random_and_adversarial_raters_are_flagged_within_a_bounded_number_of_votes() -> None:
    rng = np.random.default_rng(100)
    kinds = ["honest"] * 160 + ["random"] * 20 + ["adversary"] * 20
    result = rater_outliers(*_campaign(rng, 20, kinds, 400), alpha=0.01)
    kind = np.array(kinds)
    honest, random, adversary = kind == "honest", kind == "random", kind == "adversary"
    # The honest majority stays unflagged even with 20% bad raters in the consensus.
    assert result.flagged[honest].mean() <= 0.02
    # Always the weaker side: every one flagged, median about 14 votes (measured), all within 40.
    assert result.flagged[adversary].all()
    assert np.median(result.votes_to_flag[adversary]) <= 25
    assert result.votes_to_flag[adversary].max() <= 40
    # Coin flips (ties at 20%, pairs often close): at least 90% flagged within 400 votes, median ~150.
    assert result.flagged[random].mean() >= 0.9
    assert np.median(result.votes_to_flag[random][result.flagged[random]]) <= 250
    # The e-value at the flag is at least the threshold, and flag_row points at that rater's vote.
    rows = result.flag_row[result.flagged]
    assert np.all(rows >= 0)
    assert np.all(result.log_e_max[result.flagged] >= np.log(100))


def test_flag_row_and_votes_to_flag_agree_with_the_log() -> None:
    rng = np.random.default_rng(3)
    kinds = ["honest"] * 50 + ["adversary"]
    rater, left, right, outcome = _campaign(rng, 10, kinds, 200)
    result = rater_outliers(rater, left, right, outcome)
    index = int(np.flatnonzero(result.raters == 50)[0])
    assert result.flagged[index]
    row = int(result.flag_row[index])
    assert rater[row] == 50
    # votes_to_flag counts the adversary's votes up to and including that row.
    assert int((rater[: row + 1] == 50).sum()) == int(result.votes_to_flag[index])


def test_a_pair_only_this_rater_voted_on_gives_no_evidence() -> None:
    # Rater 1 always loses-side on pair (0, 1), but nobody else voted on it.
    rater = np.array([1] * 50 + [2] * 50)
    left = np.array([0] * 50 + [2] * 50)
    right = np.array([1] * 50 + [3] * 50)
    outcome = np.array([RIGHT_WINS] * 50 + [LEFT_WINS] * 50)
    result = rater_outliers(rater, left, right, outcome)
    assert not result.flagged.any()
    assert result.n_informative.tolist() == [0, 0]
    assert result.log_e.tolist() == [0.0, 0.0]


def test_sides_are_normalised() -> None:
    # The consensus prefers 0 over 1; the rater under test always picks 1, shown on either side.
    others = 40
    rater = np.concatenate([np.arange(others) + 10, np.zeros(20, dtype=np.int64)])
    left = np.concatenate([np.zeros(others, dtype=np.int64), np.tile([0, 1], 10)])
    right = np.concatenate([np.ones(others, dtype=np.int64), np.tile([1, 0], 10)])
    outcome = np.concatenate([np.full(others, LEFT_WINS), np.tile([RIGHT_WINS, LEFT_WINS], 10)])
    result = rater_outliers(rater, left, right, outcome)
    assert result.flagged[result.raters == 0].all()
    assert not result.flagged[result.raters != 0].any()


def test_an_all_tie_rater_is_skipped_by_default_and_drifts_under_half() -> None:
    rng = np.random.default_rng(8)
    rater, left, right, outcome = _campaign(rng, 8, ["honest"] * 40, 150, tie_rate=0.1)
    mine = rater == 0
    outcome = np.where(mine, BOTH_BAD, outcome)
    skip = rater_outliers(rater, left, right, outcome)
    assert not skip.flagged[0] and skip.n_informative[0] == 0
    half = rater_outliers(rater, left, right, outcome, ties="half")
    assert half.flagged[0]


def test_empty_log_and_input_checks() -> None:
    empty = rater_outliers([], [], [], [])
    assert empty.raters.size == 0 and empty.threshold == pytest.approx(100.0)
    with pytest.raises(ValueError):
        rater_outliers([1], [0], [0], [LEFT_WINS])
    with pytest.raises(ValueError):
        rater_outliers([1], [0], [1], [7])
    with pytest.raises(ValueError):
        rater_outliers([1], [0], [1], [LEFT_WINS], alpha=1.5)
    with pytest.raises(ValueError):
        rater_outliers([1.5], [0], [1], [LEFT_WINS])  # a fractional rater id is refused, not truncated
    with pytest.raises(ValueError):
        rater_outliers([1, 2], [0], [1], [LEFT_WINS])


def test_gold_accuracy_counts_with_wilson_intervals() -> None:
    result = gold_accuracy([7, 7, 7, 7, 3, 3], [True, True, True, False, False, False])
    assert result.raters.tolist() == [3, 7]
    assert result.n.tolist() == [2, 4]
    assert result.correct.tolist() == [0, 3]
    assert result.accuracy.tolist() == pytest.approx([0.0, 0.75])
    # Wilson for 3 of 4 at 95%: 0.3006 .. 0.9544.
    assert result.lower[1] == pytest.approx(0.3006, abs=1e-4)
    assert result.upper[1] == pytest.approx(0.9544, abs=1e-4)
    assert result.lower[0] == 0.0 and 0 < result.upper[0] < 1
    # A script answering gold at random is told apart from a careful rater at 40 gold battles each.
    rng = np.random.default_rng(1)
    careful = rng.random(40) < 0.95
    coin = rng.random(40) < 0.5
    both = gold_accuracy(np.repeat([1, 2], 40), np.concatenate([careful, coin]))
    assert both.lower[0] > both.upper[1]
