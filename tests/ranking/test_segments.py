"""Rater-segment boards: segment x model offsets recovered against a planted truth, the heterogeneity test,
the reasons where nothing can be estimated, per-segment style coefficients, and the board block."""

from __future__ import annotations

import numpy as np
import pytest

from ranking.compute import Method
from ranking.estimators import BASE, SCALE
from ranking.estimators.segments import fit_segment_styles, fit_segments
from ranking.estimators.style import style_differences
from ranking.estimators.synthetic import simulate_style_counts
from ranking.policy import STYLE_FEATURES, VoteArrays
from ranking.segments import MIN_SEGMENT_VOTES, OTHER, segments_compute

THETA = np.linspace(-1.0, 1.0, 5)


def simulate(
    seed: int,
    *,
    offsets: np.ndarray | None = None,
    n_segments: int = 3,
    raters_per_segment: int = 20,
    votes_per_rater: int = 60,
    rater_sd: float = 0.3,
    tie_rate: float = 0.0,
    style_beta: np.ndarray | None = None,
) -> dict[str, np.ndarray]:
    """Votes by Bradley-Terry (no ties by default: ties drawn at random, whatever the strengths, would shrink
    every logit by their rate) with a segment x model offset and each rater's own taste (a random offset
    per rater and model: what makes a rater's votes dependent). ``style_beta``: (segments, 4) style
    coefficients, a segment's raters swayed by style its own way."""
    rng = np.random.default_rng(seed)
    n = THETA.shape[0]
    off = np.zeros((n_segments, n)) if offsets is None else offsets
    raters = n_segments * raters_per_segment
    rater_segment = np.repeat(np.arange(n_segments), raters_per_segment)
    taste = rng.normal(0.0, rater_sd, (raters, n))
    rater = np.repeat(np.arange(raters), votes_per_rater)
    m = rater.shape[0]
    a = rng.integers(0, n, m)
    b = (a + rng.integers(1, n, m)) % n
    seg = rater_segment[rater]
    z = (THETA[a] + off[seg, a] + taste[rater, a]) - (THETA[b] + off[seg, b] + taste[rater, b])
    left, right = simulate_style_counts(rng, m), simulate_style_counts(rng, m)
    if style_beta is not None:
        z = z + np.einsum("ij,ij->i", style_differences(left, right).x, style_beta[seg])
    outcome = np.where(rng.random(m) < tie_rate, 2, np.where(rng.random(m) < 1 / (1 + np.exp(-z)), 0, 1))
    return {"a": a, "b": b, "outcome": outcome, "segment": seg, "rater": rater + 100, "left": left, "right": right}


def fit(votes: dict[str, np.ndarray], n_segments: int = 3, **kwargs):  # type: ignore[no-untyped-def]
    return fit_segments(
        votes["a"],
        votes["b"],
        votes["outcome"],
        votes["segment"],
        votes["rater"],
        n_competitors=THETA.shape[0],
        n_segments=n_segments,
        **kwargs,
    )


def published_truth(offsets: np.ndarray) -> np.ndarray:
    """The offsets as published: each model's relative to its mean over the segments, then centred over
    the models in each segment."""
    rel = offsets - offsets.mean(axis=0, keepdims=True)
    return rel - rel.mean(axis=1, keepdims=True)


def test_a_planted_segment_offset_is_recovered_inside_its_interval() -> None:
    planted = np.zeros((3, 5))
    planted[2, 4] = 1.0  # segment 2's raters like model 4 much more than everyone else does
    votes = simulate(1, offsets=planted)
    result = fit(votes)
    truth = published_truth(planted)
    assert result.converged
    z = 1.96
    # The planted cell: clearly positive, its true value inside its interval.
    assert result.offset[2, 4] - z * result.offset_se[2, 4] > 0.1
    assert abs(result.offset[2, 4] - truth[2, 4]) <= z * result.offset_se[2, 4]
    # Every cell within three standard errors of the truth, and the two unplanted segments agree with
    # each other (their offsets are the same in truth).
    assert np.all(np.abs(result.offset - truth) <= 3 * result.offset_se)
    diff = result.offset[0] - result.offset[1]
    assert np.all(np.abs(diff) <= 3 * np.hypot(result.offset_se[0], result.offset_se[1]))
    # Offsets are identified by their centring: zero over the models in a segment, and over segments.
    np.testing.assert_allclose(result.offset.sum(axis=1), 0.0, atol=1e-8)
    np.testing.assert_allclose(result.offset.sum(axis=0), 0.0, atol=1e-6)
    # The segment's own board puts model 4 on top; the model's overall score order is the planted one.
    assert int(np.argmax(result.segment_theta[2])) == 4
    assert list(np.argsort(result.theta)) == [0, 1, 2, 3, 4]
    h = result.heterogeneity
    assert h.reason is None and h.df == (3 - 1) * (5 - 1) and h.raters == 60
    assert h.p_value is not None and h.p_value < 0.01


@pytest.mark.parametrize("seed", [11, 12])
def test_no_heterogeneity_the_test_does_not_reject(seed: int) -> None:
    result = fit(simulate(seed))
    h = result.heterogeneity
    assert h.reason is None and h.p_value is not None
    assert h.p_value > 0.05
    assert np.all(np.abs(result.offset) <= 3 * result.offset_se)


def test_rater_clustering_widens_intervals_when_raters_have_their_own_taste() -> None:
    votes = simulate(3, rater_sd=0.8, votes_per_rater=120, raters_per_segment=10)
    clustered = fit(votes)
    one_vote_each = fit({**votes, "rater": np.arange(votes["rater"].shape[0])})
    np.testing.assert_allclose(clustered.offset, one_vote_each.offset)  # same estimate, other covariance
    assert np.median(clustered.offset_se / one_vote_each.offset_se) > 1.3


def test_a_segment_with_too_few_votes_gets_a_reason_and_no_numbers_in_the_test() -> None:
    votes = simulate(4)
    small = (votes["segment"] == 2) & (votes["rater"] >= 100 + 2 * 20 + 1)  # keep one rater of segment 2
    kept = {k: v[~small] for k, v in votes.items()}
    result = fit(kept, min_segment_votes=100)
    assert result.segment_votes[2] == 60
    assert result.segment_reason[2] == "too few votes (60 < 100)"
    assert not result.estimable[2].any()
    assert result.segment_reason[0] is None and result.segment_reason[1] is None
    assert result.heterogeneity.segments == (0, 1)
    assert result.heterogeneity.df == 4


def test_a_model_with_too_few_votes_in_a_segment_is_left_out_of_that_segment_only() -> None:
    votes = simulate(5)
    thin = (votes["segment"] == 1) & ((votes["a"] == 0) | (votes["b"] == 0))
    thin &= np.cumsum(thin) > 10  # ten of its votes stay
    result = fit({k: v[~thin] for k, v in votes.items()})
    assert not result.estimable[1, 0] and result.estimable[0, 0] and result.estimable[2, 0]
    assert result.cell_reason[1][0] == "too few votes in this segment (10 < 30)"
    assert result.heterogeneity.models == (1, 2, 3, 4)


def test_one_segment_all_ties_and_disconnected_comparisons_are_said_not_estimated() -> None:
    votes = simulate(6, n_segments=1)
    alone = fit(votes, n_segments=1)
    assert alone.heterogeneity.p_value is None
    assert alone.heterogeneity.reason == "fewer than two segments can be estimated: nothing to compare"

    ties = simulate(7, tie_rate=1.0)
    flat = fit(ties)
    np.testing.assert_allclose(flat.offset, 0.0, atol=1e-9)
    np.testing.assert_allclose(flat.theta, 0.0, atol=1e-9)
    assert flat.heterogeneity.p_value is None
    assert "every vote a tie" in (flat.heterogeneity.reason or "")
    assert np.all(flat.offset_se > 0.05)  # an honest width, not the clustered variance's zero

    # In segment 1, models {0, 1} only ever meet each other, and {2, 3, 4} each other.
    split = simulate(8)
    group = np.array([0, 0, 1, 1, 1])
    cross = (split["segment"] == 1) & (group[split["a"]] != group[split["b"]])
    result = fit({k: v[~cross] for k, v in split.items()})
    assert result.segment_reason[1] is None
    assert result.estimable[1].tolist() == [False, False, True, True, True]
    assert result.cell_reason[1][0] == "not compared, in this segment, with the segment's largest group of models"


def test_too_few_raters_for_the_contrasts_is_a_reason_not_a_p_value() -> None:
    votes = simulate(9, raters_per_segment=2, votes_per_rater=400)  # 6 raters, 8 contrasts
    h = fit(votes).heterogeneity
    assert h.p_value is None and h.df == 8
    assert h.reason is not None and h.reason.startswith("too few raters (6)")


def test_style_coefficients_per_segment_recover_each_segments_own_style() -> None:
    beta = np.zeros((2, 4))
    beta[0, 0] = 0.6  # segment 0 is swayed by length, segment 1 not at all
    votes = simulate(10, n_segments=2, style_beta=beta, raters_per_segment=30)
    styles = fit_segment_styles(
        votes["a"],
        votes["b"],
        votes["outcome"],
        votes["left"],
        votes["right"],
        votes["segment"],
        n_competitors=5,
        n_segments=2,
        feature_names=STYLE_FEATURES,
    )
    for k in range(2):
        st = styles[k]
        assert st.reason is None and st.coef is not None and st.lower is not None and st.upper is not None
        assert st.names[0] == "tokens"
        assert st.lower[0] <= beta[k, 0] <= st.upper[0]
    assert styles[0].lower[0] > 0.3 and styles[1].upper[0] < 0.3  # type: ignore[index]
    few = fit_segment_styles(
        votes["a"][:50],
        votes["b"][:50],
        votes["outcome"][:50],
        votes["left"][:50],
        votes["right"][:50],
        votes["segment"][:50],
        n_competitors=5,
        n_segments=2,
        min_votes=100,
    )
    assert few[0].coef is None and few[0].reason == "too few votes (50 < 100)"


def _vote_arrays(votes: dict[str, np.ndarray], ids: np.ndarray) -> VoteArrays:
    m = votes["a"].shape[0]
    return VoteArrays(
        vote_id=np.arange(1, m + 1, dtype=np.int64),
        left=ids[votes["a"]],
        right=ids[votes["b"]],
        outcome=votes["outcome"].astype(np.int64),
        decision_ms=np.full(m, 5000, dtype=np.int64),
        rater=votes["rater"].astype(np.int64),
        prompt=np.zeros(m, dtype=np.int64),
        category=np.zeros(m, dtype=np.int64),
        categories=("",),
        identity=np.zeros(m, dtype=bool),
        style_left=votes["left"],
        style_right=votes["right"],
    )


def test_the_board_block_names_segments_pools_the_smallest_and_says_why_others_are_left_out(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import ranking.segments as segments_module

    monkeypatch.setattr(segments_module, "SEGMENTS_MAX", 2)
    planted = np.zeros((3, 5))
    planted[2, 4] = 0.8
    votes = simulate(1, offsets=planted)
    ids = np.array([11, 12, 13, 14, 15], dtype=np.int64)
    raters = np.unique(votes["rater"])
    names = {0: "en", 1: "fr", 2: "de"}
    seg_of = {int(r): int(votes["segment"][votes["rater"] == r][0]) for r in raters}
    language = {r: names[s] for r, s in seg_of.items()}
    language[int(raters[-1]) + 1] = "it"  # a rater of another campaign: no votes here
    # One extra rater with a tiny segment of their own.
    extra = {k: v[:30].copy() for k, v in votes.items()}
    extra["rater"][:] = 999
    language[999] = "nl"
    allv = {k: np.concatenate([votes[k], extra[k]]) for k in votes}
    expertise = {int(raters[0]): "medicine"}  # too few votes for a second key to compare anything
    block = segments_compute(
        _vote_arrays(allv, ids),
        ids,
        {int(i): f"model {i}" for i in ids},
        Method(min_votes=30),
        kept=allv["a"].shape[0],
        attributes={"language": language, "expertise": expertise, "empty": {}},
    )
    assert block["reason"] is None
    assert block["computed_from"]["votes"] == allv["a"].shape[0] and not block["computed_from"]["sampled"]
    lang = block["keys"][0]
    assert lang["key"] == "language" and lang["votes_without_value"] == 0
    values = [s["value"] for s in lang["segments"]]
    assert values == ["de", OTHER]  # 1200 votes each; "de" first by name, then the rest pooled
    assert lang["segments"][1]["members"] == ["en", "fr"]
    assert lang["left_out"] == [
        {"value": "nl", "votes": 30, "reason": f"too few votes (30 < {MIN_SEGMENT_VOTES}): not fitted"}
    ]
    de = lang["segments"][0]
    top = de["rows"][0]
    assert top["competitor_id"] == 15 and top["label"] == "model 15" and top["rank_best"] == 1
    assert top["offset_lower"] > 0 and top["lower"] < top["score"] < top["upper"]
    assert abs(np.mean([r["score"] for r in de["rows"]]) - BASE) < 0.5
    assert top["offset_se"] == pytest.approx(
        SCALE * (top["offset_upper"] - top["offset_lower"]) / (2 * 1.96 * SCALE), abs=0.2
    )
    assert de["style"]["reason"] is None and [c["feature"] for c in de["style"]["coefficients"]]
    assert lang["heterogeneity"]["segments"] == ["de", OTHER] and lang["heterogeneity"]["p_value"] < 0.01
    assert block["keys"][1]["key"] == "expertise"
    assert block["keys"][1]["reason"] == f"No value of this attribute has {MIN_SEGMENT_VOTES} votes."


def test_the_board_block_without_attributes_says_so() -> None:
    votes = simulate(2)
    ids = np.arange(1, 6, dtype=np.int64)
    block = segments_compute(_vote_arrays(votes, ids), ids, {}, Method(), kept=votes["a"].shape[0], attributes={})
    assert block["keys"] == []
    assert block["reason"].startswith("No rater of these votes carries an attribute")


def test_a_one_sided_record_in_a_segment_gets_a_reason_not_the_priors_number() -> None:
    votes = simulate(13)
    # In segment 0, model 4 wins every vote it is in.
    mine = (votes["segment"] == 0) & ((votes["a"] == 4) | (votes["b"] == 4))
    outcome = votes["outcome"].copy()
    outcome[mine & (votes["a"] == 4)] = 0
    outcome[mine & (votes["b"] == 4)] = 1
    result = fit({**votes, "outcome": outcome})
    assert not result.estimable[0, 4] and result.estimable[1, 4]
    assert (
        result.cell_reason[0][4]
        == "one-sided record in this segment (won every vote): the votes set no bound on its offset"
    )
    assert 4 not in result.heterogeneity.models


def test_the_board_block_with_no_votes_or_one_model_says_so() -> None:
    votes = simulate(2)
    ids = np.arange(1, 6, dtype=np.int64)
    arrays = _vote_arrays(votes, ids)
    language = {int(r): "en" for r in np.unique(votes["rater"])}
    empty = segments_compute(
        arrays.subset(np.zeros(len(arrays), dtype=bool)), ids, {}, Method(), kept=0, attributes={"language": language}
    )
    assert empty["keys"] == [] and empty["reason"] == "No votes kept yet."
    pair = (votes["a"] < 2) & (votes["b"] < 2)  # only models 1 and 2 meet; min_votes leaves one of them
    one = segments_compute(
        arrays.subset(pair), ids, {}, Method(min_votes=10_000), kept=int(pair.sum()), attributes={"language": language}
    )
    assert one["keys"] == [] and one["reason"] == "Fewer than two models have 10000 votes: nothing to rank by segment."
