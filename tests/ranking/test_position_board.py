"""The position and pair-frequency sections through the recompute, the API and the board page: raw boards
carry ``extra.position`` and ``extra.pair_frequency`` computed from their own votes (the estimator's numbers
on the same log), the style view does not, and the page shows both beside the unweighted board."""

from __future__ import annotations

import numpy as np
import pytest
from django.template.loader import render_to_string
from django.urls import reverse

from battles.models import Competitor
from ranking.compute import competitor_codes
from ranking.estimators import position as pos
from ranking.selectors import vote_arrays
from ranking.services import leaderboards_recompute

from .test_recompute import board  # noqa: F401  (the fixture)

pytestmark = pytest.mark.django_db


def test_raw_boards_carry_both_sections_in_the_api_and_on_the_page(board, alice_client):  # noqa: F811
    campaign, competitors, rare = board
    leaderboards_recompute(campaign_id=campaign.pk)
    url = reverse("leaderboard", args=[campaign.pk])
    extra = alice_client.get(url).json()["extra"]
    position, frequency = extra["position"], extra["pair_frequency"]

    # The estimator on the same log gives the same h: the block is the board's votes, sides as shown.
    votes = vote_arrays(campaign_id=campaign.pk)
    ids = np.array(sorted(Competitor.objects.filter(campaign=campaign, gold=False).values_list("pk", flat=True)))
    a, b = competitor_codes(votes.left, votes.right, ids)
    expected = pos.fit_position(pos.oriented_counts(a, b, votes.outcome, n_competitors=len(ids)))
    assert position["estimable"] and position["h"] == round(expected.h, 4)  # type: ignore[arg-type]
    # The synthetic log shows sides by a coin flip and has no side effect: the interval covers 0.
    assert position["lower"] < 0 < position["upper"] and position["computed_from"]["votes"] == 605
    assert position["left_wins"] + position["right_wins"] + position["ties"] == 605
    assert position["pairs"] == 7 and position["pairs_both_ways"] == 7
    assert {r["competitor_id"] for r in position["rows"]} == {c.pk for c in competitors}  # the rare one hidden

    assert frequency["available"] and frequency["pairs"] == 7 and frequency["votes"] == 605
    # No pair was shown 1.5 times the mean; the hidden competitor's pair (5 votes) is not blown up.
    assert frequency["over_sampled"] == [] and frequency["trimmed_pairs"] == 0
    assert frequency["effective_votes"] > 0.95 * 605
    row = frequency["rows"][0]
    assert row["weighted"]["lower"] < row["weighted"]["score"] < row["weighted"]["upper"]
    assert row["weighted"]["rank_best"] == 1 and row["unweighted"]["rank_best"] == 1

    coding = alice_client.get(url + "?category=coding").json()
    assert coding["extra"]["position"]["computed_from"]["votes"] == coding["votes_used"] < 605
    assert "position" not in alice_client.get(url + "?view=style").json()["extra"]

    page = alice_client.get(reverse("ranking:leaderboard", args=[campaign.pk])).content.decode()
    assert "Left-side advantage" in page and 'id="position-scores"' in page
    assert 'id="pair-frequency-scores"' in page and "Over-sampled" not in page
    style_page = alice_client.get(reverse("ranking:leaderboard", args=[campaign.pk]) + "?view=style").content.decode()
    assert "Left-side advantage" not in style_page


def test_section_says_why_escapes_labels_and_shows_open_sides():
    """The partial alone: a confounded board says so instead of a number; labels are escaped; an interval the
    votes bound on one side only reads "≥ x"."""
    side = {"score": 1200.0, "lower": 1100.0, "upper": None, "lower_open": False, "upper_open": True}
    snapshot = {
        "extra": {
            "position": {
                "estimable": False,
                "reason": pos.CONFOUNDED_REASON,
                "computed_from": {"votes": 40},
                "confidence_pct": 95,
                "left_wins": 30,
                "right_wins": 10,
                "ties": 0,
                "left_share": 0.75,
                "left_share_lower": 0.6,
                "left_share_upper": 0.86,
                "pairs": 1,
                "pairs_both_ways": 0,
                "votes_in_pairs_both_ways": 0,
            },
            "pair_frequency": {
                "available": True,
                "confidence_pct": 95,
                "pairs": 1,
                "mean_count": 40,
                "effective_votes": 40,
                "votes": 40,
                "trimmed_pairs": 0,
                "balanced": True,
                "over_sampled": [],
                "rows": [
                    {
                        "competitor_id": 7,
                        "label": "<script>alert(1)</script>",
                        "unweighted": {**side, "rank_best": 1, "rank_worst": 1},
                        "weighted": {**side, "rank_best": 1, "rank_worst": 2},
                        "shift": 0.0,
                    }
                ],
            },
        }
    }
    html = render_to_string("ranking/_position.html", {"snapshot": snapshot})
    assert "Left-side advantage not estimable: the sides are confounded" in html and "score points" not in html
    assert "<script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "≥ 1100" in html and "1–2" in html and "the two fits agree" in html
