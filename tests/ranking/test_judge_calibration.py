"""A judge's calibration against the humans uses exactly the human votes the human board uses (the campaign's
exclusion policy, found by the board's own selector), says how many it used and how many it left out and why,
and passes a gate only where the agreement's interval supports it (issue 20.1).

The verdicts are written as the judge run writes them (one counterbalanced verdict per battle): what is under
test is what a calibration makes of them, not a model's replies."""

from __future__ import annotations

import numpy as np
import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from battles.models import Campaign, Judge, JudgeRun, JudgeVerdict
from battles.services import judge_run_create
from ranking import estimators as est
from ranking import services
from ranking.compute import calibration_compute
from ranking.models import JudgeCalibration, LeaderboardSnapshot
from raters.models import RaterFlag

from ..battles.judge_world import Planted, battle_plant, judge_make
from ..conftest import MODEL_SERVER_URL, Tenant
from ..factories import UserFactory

pytestmark = pytest.mark.django_db

OTHER = {"left": "right", "right": "left"}


def _verdicts(tenant: Tenant, judge: Judge, planted: list[Planted], choices: list[str]) -> JudgeRun:
    """One finished battles run of ``judge`` whose verdict on each planted battle is the given choice."""
    run = judge_run_create(judge=judge, campaign=tenant.campaign, actor=None, start=False)
    for item, choice in zip(planted, choices, strict=True):
        battle = item.battle
        JudgeVerdict.objects.create(
            organization=tenant.organization,
            campaign=tenant.campaign,
            run=run,
            judge=judge,
            rubric=judge.rubric,
            rubric_version=judge.rubric.version,
            rubric_hash=judge.rubric.content_hash,
            battle=battle,
            prompt=battle.prompt,
            category=battle.prompt.category,
            left=battle.left,
            right=battle.right,
            choice=choice,
            consistent=True,
            refused=False,
            verdict_ab=choice,
            verdict_ba=OTHER.get(choice, choice),
        )
    JudgeRun.objects.filter(pk=run.pk).update(status=JudgeRun.Status.DONE)
    return run


@pytest.fixture
def adversary(acme: Tenant) -> User:
    return UserFactory.create(email="mallory@acme.test")


def _campaign_with_an_adversary(acme: Tenant, bob: User, adversary: User) -> list[Planted]:
    """40 voted battles with a known better side: bob votes the truth on 20; the adversary (flagged, as the
    board's policy sees it) votes against it on the other 20."""
    planted = []
    for i in range(40):
        better = "left" if i % 3 else "right"
        honest = i % 2 == 0
        planted.append(
            battle_plant(
                acme,
                left=acme.left,
                right=acme.right,
                better=better,
                index=i,
                vote=better if honest else OTHER[better],
                rater=bob if honest else adversary,
                category="coding" if i % 4 < 2 else "writing",
            )
        )
    RaterFlag.objects.create(organization=acme.organization, rater=adversary, reason="votes against the truth")
    return planted


def test_an_always_right_judge_calibrates_at_1_on_the_votes_the_board_keeps(
    acme: Tenant, bob: User, adversary: User, alice_client: Client
) -> None:
    planted = _campaign_with_an_adversary(acme, bob, adversary)
    judge = judge_make(acme, url=MODEL_SERVER_URL)
    run = _verdicts(acme, judge, planted, [p.better for p in planted])  # always right
    services.judge_run_settle(run_id=run.pk)
    rows = {row.category: row for row in JudgeCalibration.objects.filter(judge=judge)}
    overall = rows[""]
    # Before: every non-gold vote, the adversary's included: agreement 0.5, kappa about 0, "needs work".
    assert overall.battles == 20 and overall.agreement == 1.0 and overall.kappa == 1.0
    assert overall.extra["human_votes"] == {
        "human_votes": 40,
        "used": 20,
        "refused": 0,
        "excluded": {
            "too_fast": 0,
            "identity_leak": 0,
            "over_prompt_cap": 0,
            "over_rater_cap": 0,
            "flagged_rater": 20,
            "total": 20,
        },
    }
    assert overall.extra["policy"]["flagged_raters"] == [adversary.pk]
    # 20 of 20: the interval's lower end is 0.84, so "with humans", not yet "may run alone".
    assert overall.agreement_lower is not None and 0.83 < overall.agreement_lower < 0.85
    assert overall.gate == JudgeCalibration.Gate.WITH_HUMANS
    assert rows["coding"].battles + rows["writing"].battles == 20
    assert rows["coding"].extra["human_votes"]["excluded"]["flagged_rater"] == 10
    # The human board leaves out the same votes for the same reason.
    services.leaderboards_recompute(campaign_id=acme.campaign.pk)
    board = LeaderboardSnapshot.objects.filter(campaign=acme.campaign, category="", view="raw").latest("version")
    assert board.votes_used == overall.extra["human_votes"]["used"] == 20
    assert board.excluded == overall.extra["human_votes"]["excluded"]
    assert board.policy == overall.extra["policy"]
    # The API says how many votes were used, how many were left out and why, and the gate rule.
    body = alice_client.get(f"/api/v1/campaigns/{acme.campaign.pk}/judges/{judge.pk}/calibration/").json()
    assert body["gate_rule"] == est.GATE_RULE and body["gate_confidence"] == 0.95
    assert body["policy"]["flagged_raters"] == [adversary.pk]
    top = body["results"][0]
    assert top["category"] == "" and top["battles"] == 20 and top["agreement"] == 1.0
    assert top["human_votes"] == 40 and top["used"] == 20 and top["excluded"]["flagged_rater"] == 20
    # So do the console's pages.
    listing = alice_client.get(reverse("admin:ranking_judgecalibration_changelist")).content.decode()
    assert "20 used of 40; 20 excluded as on the board (20 flagged rater)" in listing
    page = alice_client.get(reverse("admin:ranking_judgecalibration_change", args=[overall.pk])).content.decode()
    assert "Wilson interval is at least 0.90" in page and "1.00 [0.84, 1.00]" in page


def test_too_fast_votes_are_left_out_as_the_board_leaves_them(acme: Tenant, bob: User) -> None:
    Campaign.objects.filter(pk=acme.campaign.pk).update(min_decision_ms=1000)
    planted = []
    for i in range(30):
        better = "left" if i % 2 else "right"
        fast = i < 10  # a click-through: against the truth, in 300 ms
        planted.append(
            battle_plant(
                acme,
                left=acme.left,
                right=acme.right,
                better=better,
                index=i,
                vote=OTHER[better] if fast else better,
                rater=bob,
                decision_ms=300 if fast else 4000,
            )
        )
    judge = judge_make(acme, url=MODEL_SERVER_URL)
    run = _verdicts(acme, judge, planted, [p.better for p in planted])
    services.judge_run_settle(run_id=run.pk)
    overall = JudgeCalibration.objects.get(judge=judge, category="")
    assert overall.battles == 20 and overall.agreement == 1.0
    assert overall.extra["human_votes"]["excluded"]["too_fast"] == 10
    assert overall.extra["human_votes"]["excluded"]["total"] == 10


def test_18_of_20_never_lets_a_judge_run_alone() -> None:
    human = np.zeros(20, dtype=np.int64)
    judge = np.array([0] * 18 + [1] * 2, dtype=np.int64)
    out = calibration_compute(human, judge)
    assert out["agreement"] == 0.9 and out["agreement_lower"] == pytest.approx(0.699, abs=1e-3)
    # Under the point rule this was "may_run_alone"; its interval spans 0.75, so it cannot tell yet.
    assert out["gate"] == "insufficient"
    assert est.calibration_gate(20, 20) == "with_humans"  # lower end 0.84
    assert est.calibration_gate(190, 200) == "may_run_alone"  # 0.95, lower end 0.91
    assert est.calibration_gate(180, 200) == "with_humans"  # 0.90 at 200 battles: lower end 0.85
    assert est.calibration_gate(5, 40) == "needs_work"  # upper end 0.27
    assert est.calibration_gate(19, 19) == "insufficient"  # under 20 battles: no gate


@pytest.mark.parametrize(
    ("truth", "gate", "passes"),
    [
        (0.85, 0.90, ("may_run_alone",)),
        (0.89, 0.90, ("may_run_alone",)),
        (0.72, 0.75, ("with_humans", "may_run_alone")),
    ],
)
def test_a_judge_below_a_gate_passes_it_rarely(truth: float, gate: float, passes: tuple[str, ...]) -> None:
    """Known truth: judges whose true agreement is below the gate, calibrated on 20 to 500 battles, 4,000
    times each (seeded). The interval rule passes them at most about 2.5% of the time (the one-sided error
    of the 95% interval's lower end; benchmarks/judge_gates.py measures the whole grid); the point rule
    passed them 10-60% of the time."""
    rng = np.random.default_rng(20_1)
    for n in (20, 50, 100, 200, 500):
        agreed = rng.binomial(n, truth, size=4000)
        false_pass = float(np.isin(est.calibration_gates(agreed, np.full(4000, n)), passes).mean())
        point = float((agreed / n >= gate).mean())
        assert false_pass <= 0.03, (truth, n, false_pass)
        if n <= 100:
            assert point >= 0.08, (truth, n, point)  # the old rule's error, for contrast: the test has power
