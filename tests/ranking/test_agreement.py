"""Agreement statistics against published examples, edge cases and interval coverage."""

from __future__ import annotations

import krippendorff
import numpy as np
import pytest
from numpy.typing import NDArray

from ranking.estimators.agreement import (
    NO_COMMON_ITEMS_REASON,
    NOT_ESTIMABLE_REASON,
    ONE_CATEGORY_REASON,
    agreement_report,
    cohen_kappa,
    cohen_kappa_table,
    fleiss_kappa,
    krippendorff_alpha,
    pairwise_cohen,
    ratings,
    raw_agreement,
)

# Fleiss (1971), Table 1: 30 patients, 6 psychiatrists each, 5 diagnoses (1 depression, 2 personality
# disorder, 3 schizophrenia, 4 neurosis, 5 other), as R's irr package ships it (``diagnoses``).
DIAGNOSES = np.array(
    [
        [4, 4, 4, 4, 4, 4],
        [2, 2, 2, 5, 5, 5],
        [2, 3, 3, 3, 3, 5],
        [5, 5, 5, 5, 5, 5],
        [2, 2, 2, 4, 4, 4],
        [1, 1, 3, 3, 3, 3],
        [3, 3, 3, 3, 5, 5],
        [1, 1, 3, 3, 3, 4],
        [1, 1, 4, 4, 4, 4],
        [5, 5, 5, 5, 5, 5],
        [1, 4, 4, 4, 4, 4],
        [1, 2, 4, 4, 4, 4],
        [2, 2, 2, 3, 3, 3],
        [1, 4, 4, 4, 4, 4],
        [2, 2, 4, 4, 4, 5],
        [3, 3, 3, 3, 3, 5],
        [1, 1, 1, 4, 5, 5],
        [1, 1, 1, 1, 1, 2],
        [2, 2, 4, 4, 4, 4],
        [1, 3, 3, 5, 5, 5],
        [5, 5, 5, 5, 5, 5],
        [2, 4, 4, 4, 4, 4],
        [2, 2, 4, 5, 5, 5],
        [1, 1, 4, 4, 4, 4],
        [1, 4, 4, 4, 4, 5],
        [2, 2, 2, 2, 2, 4],
        [1, 1, 1, 1, 5, 5],
        [2, 2, 4, 4, 4, 4],
        [1, 3, 3, 3, 3, 3],
        [5, 5, 5, 5, 5, 5],
    ]
)

# Wikipedia's Fleiss' kappa example: 10 subjects, 14 raters, 5 categories (kappa 0.210).
WIKIPEDIA_FLEISS = np.array(
    [
        [0, 0, 0, 0, 14],
        [0, 2, 6, 4, 2],
        [0, 0, 3, 5, 6],
        [0, 3, 9, 2, 0],
        [2, 2, 8, 1, 1],
        [7, 7, 0, 0, 0],
        [3, 2, 6, 3, 0],
        [2, 5, 3, 2, 2],
        [6, 5, 2, 1, 0],
        [0, 2, 2, 3, 7],
    ]
)

# Krippendorff (2011), "Computing Krippendorff's alpha-reliability", section C: 4 observers, 12 units,
# values 1..5, missing values as None. Nominal alpha = 0.743.
KRIPPENDORFF_2011: list[list[int | None]] = [
    [1, 2, 3, 3, 2, 1, 4, 1, 2, None, None, None],
    [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, None, 3],
    [None, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, None],
    [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, None],
]


def _long(table: list[list[int | None]], *, raters_in_rows: bool) -> tuple[list[int], list[int], list[int]]:
    item, rater, category = [], [], []
    for r, row in enumerate(table):
        for u, value in enumerate(row):
            if value is None:
                continue
            if raters_in_rows:
                item.append(u)
                rater.append(r)
            else:
                item.append(r)
                rater.append(u)
            category.append(value - 1)
    return item, rater, category


def _diagnoses() -> tuple[list[int], list[int], list[int]]:
    return _long(DIAGNOSES.tolist(), raters_in_rows=False)


def test_fleiss_1971_psychiatric_diagnoses() -> None:
    item, rater, category = _diagnoses()
    result = fleiss_kappa(ratings(item, rater, category, n_categories=5))
    # irr::kappam.fleiss(diagnoses): Kappa = 0.4302445, z = 17.65183 (Fleiss, Nee & Landis null variance).
    assert result.value == pytest.approx(0.4302445, abs=1e-7)
    assert result.z == pytest.approx(17.65183, abs=1e-4)
    assert result.extra["raters_per_item"] == "fixed"
    assert result.lower is not None and result.upper is not None
    assert result.lower < 0.4302445 < result.upper
    assert result.n_items == 30 and result.n_values == 180


def test_fleiss_wikipedia_example() -> None:
    result = fleiss_kappa(WIKIPEDIA_FLEISS)
    assert result.value == pytest.approx(0.210, abs=5e-4)
    assert result.observed == pytest.approx(0.378, abs=5e-4)
    assert result.expected == pytest.approx(0.213, abs=5e-4)


def test_cohen_wikipedia_50_items() -> None:
    # 50 proposals: both yes 20, A yes B no 5, A no B yes 10, both no 15: p_o 0.7, p_e 0.5, kappa 0.4.
    result = cohen_kappa_table([[20, 5], [10, 15]])
    assert result.value == pytest.approx(0.4)
    assert result.observed == pytest.approx(0.7)
    assert result.expected == pytest.approx(0.5)


def test_cohen_asymptotic_standard_error_matches_sas() -> None:
    # SAS's PROC FREQ example (as statsmodels' tests record it): kappa 0.4842, ASE 0.1380,
    # 95% limits 0.2137 .. 0.7547; under H0 ASE 0.1484, Z 3.2626, two-sided p 0.0011.
    result = cohen_kappa_table([[0, 4, 1], [0, 8, 0], [0, 1, 5]])
    assert result.value == pytest.approx(0.4842, abs=1e-4)
    assert result.se == pytest.approx(0.1380, abs=1e-4)
    assert result.lower == pytest.approx(0.2137, abs=1e-4)
    assert result.upper == pytest.approx(0.7547, abs=1e-4)
    assert result.se_null == pytest.approx(0.1484, abs=1e-4)
    assert result.z == pytest.approx(3.2626, abs=1e-4)
    assert result.p_value == pytest.approx(0.0011, abs=1e-4)


def test_cohen_from_votes_on_common_items_only() -> None:
    item, rater, category = _diagnoses()
    data = ratings(item, rater, category, n_categories=5)
    # irr::kappa2(diagnoses[, 1:2]) = 0.651.
    assert cohen_kappa(data, 0, 1).value == pytest.approx(0.6512, abs=1e-4)
    # Drop rater 1's first ten patients: kappa is over the 20 common items only.
    keep = [i for i, (it, ra) in enumerate(zip(item, rater, strict=True)) if not (ra == 1 and it < 10)]
    thinned = ratings([item[i] for i in keep], [rater[i] for i in keep], [category[i] for i in keep], n_categories=5)
    a = [row[0] - 1 for row in DIAGNOSES[10:]]
    b = [row[1] - 1 for row in DIAGNOSES[10:]]
    table = np.zeros((5, 5))
    np.add.at(table, (a, b), 1)
    assert cohen_kappa(thinned, 0, 1).value == pytest.approx(cohen_kappa_table(table).value)
    assert cohen_kappa(thinned, 0, 1).n_items == 20


def test_cohen_bootstrap_interval_is_seeded_and_brackets_the_estimate() -> None:
    table = [[0, 4, 1], [0, 8, 0], [0, 1, 5]]
    first = cohen_kappa_table(table, bootstrap=500, seed=3)
    again = cohen_kappa_table(table, bootstrap=500, seed=3)
    assert first.lower == again.lower and first.upper == again.upper
    assert first.lower is not None and first.upper is not None
    assert first.lower < 0.4842 < first.upper
    assert "bootstrap" in first.interval_method


def test_krippendorff_2011_example_with_missing_values() -> None:
    item, rater, category = _long(KRIPPENDORFF_2011, raters_in_rows=True)
    result = krippendorff_alpha(ratings(item, rater, category, n_categories=5))
    assert result.value == pytest.approx(0.743, abs=5e-4)
    # Unit 12 has a single value: unpairable, left out (11 units, 40 pairable values).
    assert result.n_items == 11 and result.n_values == 40
    assert "bootstrap" in result.interval_method


def test_krippendorff_matches_the_reference_package_on_random_sparse_data() -> None:
    rng = np.random.default_rng(11)
    for _ in range(20):
        n_raters, n_units = int(rng.integers(2, 7)), int(rng.integers(5, 60))
        data = rng.integers(1, 5, size=(n_raters, n_units)).astype(float)
        data[rng.random(data.shape) < rng.uniform(0.0, 0.6)] = np.nan
        table: list[list[int | None]] = [[None if np.isnan(v) else int(v) for v in row] for row in data]
        item, rater, category = _long(table, raters_in_rows=True)
        ours = krippendorff_alpha(ratings(item, rater, category, n_categories=4), bootstrap=0)
        pairable = (~np.isnan(data)).sum(axis=0) >= 2
        values = data[:, pairable]
        if values.size == 0 or len(np.unique(values[~np.isnan(values)])) < 2:
            assert ours.value is None
            continue
        expected = krippendorff.alpha(reliability_data=data, level_of_measurement="nominal")
        assert ours.value == pytest.approx(expected, abs=1e-10)


def test_fleiss_with_varying_raters_per_item_is_stated() -> None:
    counts = np.array([[2, 0, 0], [1, 1, 1], [0, 3, 1], [0, 0, 2], [4, 1, 0]])
    result = fleiss_kappa(counts)
    assert result.extra["raters_per_item"] == "varying"
    assert result.z is None and result.se_null is None  # the null variance needs a fixed n
    n = counts.sum(axis=1)
    p_i = (counts * (counts - 1)).sum(axis=1) / (n * (n - 1))
    p_j = counts.sum(axis=0) / counts.sum()
    expected = (p_i.mean() - (p_j**2).sum()) / (1 - (p_j**2).sum())
    assert result.value == pytest.approx(expected)


def test_nothing_shared_is_not_estimable() -> None:
    data = ratings([1, 2, 3], [10, 11, 12], [0, 1, 2])
    raw = raw_agreement(data)
    assert raw.overall is None and raw.reason == NOT_ESTIMABLE_REASON
    for result in (fleiss_kappa(data), krippendorff_alpha(data)):
        assert result.value is None and result.reason == NOT_ESTIMABLE_REASON
    kappa = cohen_kappa(data, 10, 11)
    assert kappa.value is None and kappa.reason == NO_COMMON_ITEMS_REASON
    empty = ratings([], [], [])
    assert fleiss_kappa(empty).value is None and krippendorff_alpha(empty).value is None


def test_one_category_is_undefined_not_a_number() -> None:
    data = ratings([1, 1, 2, 2, 3, 3], [1, 2, 1, 2, 1, 2], [0, 0, 0, 0, 0, 0])
    for result in (fleiss_kappa(data), krippendorff_alpha(data), cohen_kappa(data, 1, 2)):
        assert result.value is None
        assert result.reason == ONE_CATEGORY_REASON
        assert result.observed == pytest.approx(1.0)
    assert raw_agreement(data).overall == pytest.approx(1.0)


def test_bootstrap_replicates_that_are_undefined_are_counted() -> None:
    # Two items; a replicate drawing the all-"left" item twice has one category only.
    data = ratings([1, 1, 2, 2], [1, 2, 1, 2], [0, 0, 0, 1])
    result = krippendorff_alpha(data, bootstrap=400, seed=1)
    assert result.value is not None
    assert result.bootstrap_undefined > 0


def test_raw_agreement_per_item_and_per_rater() -> None:
    # Item 1: raters 1, 2, 3 say left, left, right. Item 2: raters 1 and 2 say tie, tie.
    data = ratings([1, 1, 1, 2, 2], [1, 2, 3, 1, 2], [0, 0, 1, 2, 2])
    raw = raw_agreement(data)
    assert raw.per_item.tolist() == pytest.approx([1 / 3, 1.0])
    assert raw.overall == pytest.approx((1 / 3 + 1) / 2)
    assert raw.overall_pairs == pytest.approx((1 + 1) / (3 + 1))
    # Rater 1: agrees with 2 on both items, not with 3: 2 of 3 pairs; rater 3 agrees with nobody.
    assert raw.rater_share.tolist() == pytest.approx([2 / 3, 2 / 3, 0.0])
    assert raw.rater_items.tolist() == [2, 2, 1]


def test_repeat_votes_of_one_rater_on_one_item_count_once() -> None:
    data = ratings([1, 1, 1], [5, 5, 6], [0, 1, 0])
    assert data.n_repeats == 1
    assert data.counts.tolist() == [[2.0, 0.0, 0.0, 0.0]]


def test_input_is_validated() -> None:
    with pytest.raises(ValueError):
        ratings([1.5], [1], [0])
    with pytest.raises(ValueError):
        ratings([1], [1], [4])
    with pytest.raises(ValueError):
        ratings([1, 2], [1], [0])
    with pytest.raises(ValueError):
        fleiss_kappa([[1, -1]])


def test_pairwise_cohen_lists_pairs_with_enough_common_items() -> None:
    item, rater, category = _diagnoses()
    data = ratings(item, rater, category, n_categories=5)
    pairs = pairwise_cohen(data, min_common=30)
    assert len(pairs) == 15  # 6 raters, all 30 items in common
    first = next(p for p in pairs if (p.rater_a, p.rater_b) == (0, 1))
    assert first.kappa.value == pytest.approx(0.6512, abs=1e-4)
    assert pairwise_cohen(data, min_common=31) == []
    report = agreement_report(data, bootstrap=100)
    assert report.fleiss.value == pytest.approx(0.4302445, abs=1e-7)
    assert report.n_items == 30


# ------------------------------------------------------------------------------------------------
# Coverage on synthetic raters with a known agreement.
#
# Each item has a true category drawn from PI; a rater reports it with probability rho and otherwise
# draws a category from PI. Every rater's marginal is PI, two raters agree with probability
# rho^2 + (1 - rho^2) sum PI^2, and so the population kappa (Cohen's and Fleiss') is rho^2.

PI = np.array([0.45, 0.4, 0.1, 0.05])  # left, right, tie, both bad


def _simulate(
    rng: np.random.Generator, n_items: int, raters_per_item: NDArray[np.int64], rho: float
) -> NDArray[np.int64]:
    truth = rng.choice(4, size=n_items, p=PI)
    m = int(raters_per_item.max())
    honest = rng.random((n_items, m)) < rho
    noise = rng.choice(4, size=(n_items, m), p=PI)
    votes = np.where(honest, truth[:, None], noise)
    votes[np.arange(m)[None, :] >= raters_per_item[:, None]] = -1
    out: NDArray[np.int64] = votes
    return out


def test_cohen_asymptotic_interval_covers_the_true_kappa() -> None:
    rng = np.random.default_rng(2024)
    rho, n_items, runs = 0.7, 150, 2000
    true_kappa = rho**2
    covered = 0
    for _ in range(runs):
        votes = _simulate(rng, n_items, np.full(n_items, 2), rho)
        table = np.zeros((4, 4))
        np.add.at(table, (votes[:, 0], votes[:, 1]), 1)
        result = cohen_kappa_table(table)
        assert result.lower is not None and result.upper is not None
        covered += result.lower <= true_kappa <= result.upper
    assert 0.92 <= covered / runs <= 0.98


def test_fleiss_and_alpha_bootstrap_intervals_cover_with_varying_raters() -> None:
    rng = np.random.default_rng(7)
    rho, n_items, runs = 0.6, 150, 300
    true_kappa = rho**2
    covered_fleiss = covered_alpha = 0
    for run in range(runs):
        per_item = rng.integers(2, 5, size=n_items)
        votes = _simulate(rng, n_items, per_item, rho)
        counts = np.stack([(votes == k).sum(axis=1) for k in range(4)], axis=1)
        fleiss = fleiss_kappa(counts, bootstrap=400, seed=run)
        alpha = krippendorff_alpha(counts, bootstrap=400, seed=run)
        assert fleiss.lower is not None and fleiss.upper is not None
        assert alpha.lower is not None and alpha.upper is not None
        covered_fleiss += fleiss.lower <= true_kappa <= fleiss.upper
        covered_alpha += alpha.lower <= true_kappa <= alpha.upper
    assert 0.92 <= covered_fleiss / runs <= 0.98
    assert 0.92 <= covered_alpha / runs <= 0.98
