"""The robustness audit (``ranking.estimators.robustness``): the fewest votes whose removal changes rank 1
or the top k, against closed forms, brute force over every small removal, and exact refits."""

from __future__ import annotations

import numpy as np
import pytest

from ranking.estimators import BOTH_BAD, LEFT_WINS, RIGHT_WINS, TIE, Cells, aggregate_cells, fit_bradley_terry
from ranking.estimators.robustness import brute_force_flip, drop_influence, refit_theta, robustness_audit


def board(records: list[tuple[int, int, int, int]], n: int) -> Cells:
    """Cells from (a, b, outcome, how many) records."""
    a: list[int] = []
    b: list[int] = []
    o: list[int] = []
    for i, j, outcome, count in records:
        a += [i] * count
        b += [j] * count
        o += [outcome] * count
    return aggregate_cells(a, b, o, n_competitors=n)


def without(cells: Cells, drops: dict[int, int]) -> Cells:
    """The same cells less ``drops[c]`` votes of cell ``c`` (weights are counts here)."""
    count = cells.count.copy()
    for c, k in drops.items():
        count[c] -= k
    return Cells(
        cells.n_competitors,
        cells.lo,
        cells.hi,
        cells.outcome,
        count.astype(np.float64),
        count.astype(np.float64),
        count,
        None,
        0,
    )


def leader(cells: Cells) -> int:
    return int(np.argmax(fit_bradley_terry(cells).scores))


@pytest.mark.parametrize(("wins_a", "wins_b", "ties"), [(11, 10, 5), (30, 12, 0), (7, 6, 40)])
def test_two_competitors_closed_form(wins_a, wins_b, ties):
    # With two competitors and the symmetric prior, the leader is whoever won more; ties move nothing.
    # Only A's wins narrow the gap, and it flips strictly once A has fewer: wins_a - wins_b + 1 of them.
    cells = board([(0, 1, LEFT_WINS, wins_a), (1, 0, LEFT_WINS, wins_b), (0, 1, TIE, ties)], 2)
    audit = robustness_audit(cells, ks=(1,), max_share=1.0)
    (rank1,) = audit.targets
    assert audit.leader == 0 and rank1.status == "flips"
    assert rank1.votes == wins_a - wins_b + 1 and rank1.verified and rank1.minimal
    assert [(d.lo, d.hi, d.outcome) for d in rank1.drops] == [(0, 1, LEFT_WINS)]
    assert rank1.top_before == (0,) and rank1.top_after == (1,)


def test_planted_fragile_board_matches_brute_force():
    # Two near-tied leaders (A 0 and B 1, A ahead by one win head to head) and a weaker C that both beat:
    # refitting every removal of up to 3 votes says one of A's wins over B is enough.
    cells = board(
        [
            (0, 1, LEFT_WINS, 9),
            (0, 1, RIGHT_WINS, 8),
            (0, 1, TIE, 3),
            (0, 2, LEFT_WINS, 7),
            (0, 2, RIGHT_WINS, 3),
            (1, 2, LEFT_WINS, 7),
            (1, 2, RIGHT_WINS, 2),
        ],
        3,
    )
    truth = brute_force_flip(cells, k=1, max_votes=3)
    audit = robustness_audit(cells, ks=(1,), max_share=1.0)
    (rank1,) = audit.targets
    assert truth == 1
    assert audit.leader == 0 and rank1.status == "flips" and rank1.votes == truth
    assert rank1.top_after == (1,)


def test_agrees_with_brute_force_on_random_small_boards():
    # Rank 1 of three competitors and the top 2 of four, each record 0-4 votes per cell: the verified
    # number equals the true minimum over every removal (up to 4 votes).
    rng = np.random.default_rng(11)
    checked = 0
    for trial in range(24):
        n, k = (3, 1) if trial % 2 else (4, 2)
        pairs = [(i, j) for i in range(n) for j in range(i + 1, n)]
        records = [(i, j, o, int(rng.integers(0, 5 if n == 3 else 3))) for i, j in pairs for o in (0, 1, 2)]
        cells = board(records, n)
        audit = robustness_audit(cells, ks=(k,), max_share=1.0)
        if audit.reason or audit.targets[0].status == "not_computed":
            continue
        truth = brute_force_flip(cells, k=k, max_votes=4)
        found = audit.targets[0].votes
        if truth is None:
            assert found is None or found > 4
        else:
            assert found == truth, (records, found, truth)
        checked += 1
    assert checked >= 18


def test_robust_board_says_so_and_verifies_a_large_number():
    # A dominant leader: A beats B and C 4 times in 5; B and C even.
    cells = board(
        [
            (0, 1, LEFT_WINS, 80),
            (0, 1, RIGHT_WINS, 20),
            (0, 2, LEFT_WINS, 80),
            (0, 2, RIGHT_WINS, 20),
            (1, 2, LEFT_WINS, 50),
            (1, 2, RIGHT_WINS, 50),
        ],
        3,
    )
    capped = robustness_audit(cells, ks=(1,), max_share=0.1)
    assert capped.targets[0].status == "robust" and capped.targets[0].votes is None
    assert capped.targets[0].checked_up_to == 30 and "30 votes" in capped.targets[0].reason
    full = robustness_audit(cells, ks=(1,), max_share=1.0).targets[0]
    assert full.status == "flips" and full.verified and full.votes is not None
    # Far beyond the fragile boards: A must lose most of its 160 wins over the two others.
    assert full.votes >= 60
    drops = {d.cell: d.votes for d in full.drops}
    assert leader(without(cells, drops)) != 0


def test_reported_removal_is_verified_by_an_independent_refit():
    # Five competitors, the top two close: the drops, removed from the cells and refitted with the board's
    # own fit, change rank 1; one vote fewer from any cell of the removal does not (the minimal claim).
    rng = np.random.default_rng(3)
    strengths = np.log([2.0, 1.9, 1.2, 1.0, 0.6])
    m = 1500
    a = rng.integers(0, 5, m)
    b = (a + rng.integers(1, 5, m)) % 5
    p = 1 / (1 + np.exp(-(strengths[a] - strengths[b])))
    u = rng.random(m)
    o = np.where(u < 0.1, TIE, np.where(u < 0.15, BOTH_BAD, np.where(rng.random(m) < p, LEFT_WINS, RIGHT_WINS)))
    cells = aggregate_cells(a, b, o, n_competitors=5)
    audit = robustness_audit(cells, ks=(1, 3))
    rank1, top3 = audit.targets
    assert rank1.status == "flips" and rank1.verified and rank1.minimal
    drops = {d.cell: d.votes for d in rank1.drops}
    assert sum(drops.values()) == rank1.votes
    start = leader(cells)
    assert audit.leader == start and leader(without(cells, drops)) == rank1.top_after[0] != start
    for c in drops:
        assert leader(without(cells, {**drops, c: drops[c] - 1})) == start
    assert top3.status == "flips"
    after = fit_bradley_terry(without(cells, {d.cell: d.votes for d in top3.drops})).scores
    assert set(np.argsort(-after)[:3]) == set(top3.top_after) != set(top3.top_before)


def test_first_order_influence_matches_a_refit_without_one_vote():
    rng = np.random.default_rng(5)
    strengths = np.log([1.5, 1.2, 1.0, 0.8])
    m = 4000
    a = rng.integers(0, 4, m)
    b = (a + rng.integers(1, 4, m)) % 4
    p = 1 / (1 + np.exp(-(strengths[a] - strengths[b])))
    o = np.where(rng.random(m) < p, LEFT_WINS, RIGHT_WINS)
    cells = aggregate_cells(a, b, o, n_competitors=4)
    theta = refit_theta(cells)
    delta = drop_influence(cells, 0, 1, theta=theta)
    for c in np.argsort(np.abs(delta))[-4:]:
        one = np.zeros(cells.n_cells, dtype=np.int64)
        one[c] = 1
        moved = refit_theta(cells, one, start=theta)
        exact = (moved[0] - moved[1]) - (theta[0] - theta[1])
        assert exact == pytest.approx(delta[c], rel=0.02)


def test_both_bad_votes_are_never_dropped_when_the_board_drops_them():
    cells = board([(0, 1, LEFT_WINS, 6), (0, 1, RIGHT_WINS, 4), (0, 1, BOTH_BAD, 50)], 2)
    counted = robustness_audit(cells, both_bad="drop", ks=(1,), max_share=1.0).targets[0]
    assert counted.votes == 3 and all(d.outcome != BOTH_BAD for d in counted.drops)
    assert robustness_audit(cells, both_bad="drop", ks=(1,), max_share=1.0).n_votes == 60


@pytest.mark.parametrize(
    ("records", "n", "both_bad", "reason"),
    [
        ([], 2, "tie", "no votes"),
        ([(0, 1, LEFT_WINS, 5), (2, 3, LEFT_WINS, 5)], 4, "tie", "disconnected"),
        ([(0, 1, BOTH_BAD, 5), (1, 2, BOTH_BAD, 5)], 3, "drop", "no vote enters the fit"),
    ],
)
def test_edge_boards_say_why(records, n, both_bad, reason):
    cells = board(records, n)
    audit = robustness_audit(cells, both_bad=both_bad, ks=(1,), max_share=1.0)
    assert audit.leader is None and audit.targets == () and reason in audit.reason


def test_one_competitor_ranked():
    # Two competitors voted, only one over the threshold: nothing to reorder.
    cells = board([(0, 1, LEFT_WINS, 5), (0, 1, RIGHT_WINS, 4)], 2)
    audit = robustness_audit(cells, shown=np.array([True, False]))
    assert audit.leader is None and "fewer than two competitors" in audit.reason


def test_all_ties_have_no_leader_to_dislodge():
    cells = board([(0, 1, TIE, 10), (1, 2, TIE, 10), (0, 2, TIE, 10)], 3)
    audit = robustness_audit(cells, ks=(1, 2), max_share=1.0)
    assert audit.leader is None
    assert [t.status for t in audit.targets] == ["not_computed", "not_computed"]
    assert "rank 1 is shared" in audit.targets[0].reason and "places 2 and 3 are tied" in audit.targets[1].reason


def test_one_sided_record_cannot_be_reversed_by_removal():
    # A won all 5: removing votes only brings it back to even, never behind (removal adds no B win).
    cells = board([(0, 1, LEFT_WINS, 5)], 2)
    (rank1,) = robustness_audit(cells, ks=(1,), max_share=1.0).targets
    assert rank1.status == "robust" and rank1.votes is None and rank1.reason


def test_top_k_of_everyone_is_not_computed():
    cells = board([(0, 1, LEFT_WINS, 5), (1, 2, LEFT_WINS, 5), (0, 2, RIGHT_WINS, 2)], 3)
    audit = robustness_audit(cells, ks=(1, 3), max_share=1.0)
    assert audit.targets[1].status == "not_computed" and "only 3 competitors" in audit.targets[1].reason


def random_board(seed: int, n: int = 12, votes: int = 4000) -> Cells:
    rng = np.random.default_rng(seed)
    theta = rng.normal(0.0, 1.0, n)
    a = rng.integers(0, n, votes)
    b = (a + rng.integers(1, n, votes)) % n
    p = 1.0 / (1.0 + np.exp(-(theta[a] - theta[b])))
    u = rng.random(votes)
    outcome = np.where(
        u < 0.1, TIE, np.where(u < 0.12, BOTH_BAD, np.where(rng.random(votes) < p, LEFT_WINS, RIGHT_WINS))
    )
    return aggregate_cells(a, b, outcome, n_competitors=n)


@pytest.mark.parametrize("seed", range(6))
def test_chord_refit_is_newtons_fit(seed):
    # A refit warm-started with a nearby fit's Hessian factor (the chord method) reaches Newton's maximum; a
    # removal that changes the Hessian too much for it falls back to Newton and still does.
    from ranking.estimators import robustness as rb

    cells = random_board(seed)
    problem = rb._problem(cells, "tie", 1.0)
    none = np.zeros(cells.n_cells, dtype=np.int64)
    theta0 = rb._refit(problem, none, None)
    factor = rb._hessian_factor(problem, none, theta0)
    rng = np.random.default_rng(seed)
    usable = np.flatnonzero(problem.usable)
    for share in (0.001, 0.01, 0.3, 0.9):
        dropped = none.copy()
        chosen = rng.choice(usable, size=max(1, int(share * usable.shape[0])), replace=False)
        dropped[chosen] = rng.integers(0, cells.count[chosen] + 1)
        newton = rb._refit(problem, dropped, theta0)
        chord = rb._refit(problem, dropped, theta0, factor)
        assert np.abs(chord - newton).max() < 1e-8
        direct = refit_theta(without(cells, {int(c): int(dropped[c]) for c in chosen}))
        assert np.abs(chord - direct).max() < 1e-8


@pytest.mark.parametrize("seed", range(6))
def test_greedy_partial_sort_is_the_full_sort(seed):
    # The greedy removal sorts only the most influential cells (doubling while they fall short): the same
    # order, sums and cut as sorting them all, ties in delta included.
    from ranking.estimators import robustness as rb

    rng = np.random.default_rng(seed)
    m = 20_000
    delta = np.round(rng.normal(0.0, 1.0, m), 2)  # many exact ties
    available = rng.integers(0, 5, m)
    candidates = np.flatnonzero((delta < 0) & (available > 0))
    full = candidates[np.argsort(delta[candidates], kind="stable")]
    cumulative = np.cumsum(-delta[full] * available[full])
    for need in (0.5, 50.0, 3000.0, float(cumulative[-1]) * 0.999, float(cumulative[-1]) * 2):
        order, partial, last = rb._leading(delta, available, candidates, need)
        assert last == int(np.searchsorted(cumulative, need))
        assert np.array_equal(order[: last + 1], full[: last + 1])
        assert np.array_equal(partial[: last + 1], cumulative[: last + 1])
