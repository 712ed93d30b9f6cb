"""The rater-quality report and the per-rater reports are pure functions of the append-only vote log, so
they are cached under a key naming the log as it stands: asked again with nothing new, the heavy part is
not recomputed; a new vote, a changed pool or other parameters compute afresh, and what is read from
outside the log (gold verdicts, flags) is never served stale."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User

from ranking import quality
from ranking.selectors import rater_quality, rater_reports
from ranking.selectors import raters as rater_selectors
from raters.models import RaterFlag
from tests.conftest import Tenant
from tests.factories import UserFactory

from .synth import vote_at

pytestmark = pytest.mark.django_db

NOW = datetime.now(UTC).replace(microsecond=0)


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """How many times each heavy computation ran ("activity": the per-rater figures, by SQL or, on PostgreSQL,
    from the packed read of the log)."""
    calls = {"quality": 0, "activity": 0}
    real_quality, real_activity = quality.quality_report, rater_selectors._rater_activity
    real_of_arrays = rater_selectors.rater_figures_of_arrays

    def of_arrays(*args: Any) -> Any:
        calls["activity"] += 1
        return real_of_arrays(*args)

    def quality_report(**kwargs: Any) -> dict[str, Any]:
        calls["quality"] += 1
        return real_quality(**kwargs)

    def activity(*args: Any) -> Any:
        calls["activity"] += 1
        return real_activity(*args)

    monkeypatch.setattr(rater_selectors, "quality_report", quality_report)
    monkeypatch.setattr(rater_selectors, "_rater_activity", activity)
    monkeypatch.setattr(rater_selectors, "rater_figures_of_arrays", of_arrays)
    return calls


def test_the_quality_report_is_computed_once_per_state_of_the_log(
    acme: Tenant, bob: User, counted: dict[str, int]
) -> None:
    vote_at(acme, rater=bob, left=acme.left, right=acme.right, at=NOW - timedelta(hours=1))
    first = rater_quality(campaign=acme.campaign)
    assert rater_quality(campaign=acme.campaign) == first
    assert counted["quality"] == 1
    # Other parameters are another report.
    rater_quality(campaign=acme.campaign, alpha=0.05)
    assert counted["quality"] == 2
    # A new vote (by a new rater) is in the next report.
    carol = UserFactory.create()
    vote_at(acme, rater=carol, left=acme.left, right=acme.right, at=NOW - timedelta(minutes=5))
    after = rater_quality(campaign=acme.campaign)
    assert counted["quality"] == 3
    assert {row["rater_id"] for row in after["raters"]} == {bob.pk, carol.pk}
    # A pool's members are part of the key: a rater joining the pool changes the report.
    acme.pool.members.add(carol)
    rater_quality(campaign=acme.campaign)
    assert counted["quality"] == 4


def test_gold_accuracy_is_read_afresh_around_the_cached_part(acme: Tenant, bob: User, counted: dict[str, int]) -> None:
    vote_at(acme, rater=bob, left=acme.left, right=acme.right, at=NOW - timedelta(hours=1), gold_expected="left")
    [row] = rater_quality(campaign=acme.campaign)["raters"]
    assert row["gold_accuracy"]["correct"] == 1
    # The report handed out is the caller's: changing it does not change the next one.
    row["gold_accuracy"]["correct"] = 99
    [again] = rater_quality(campaign=acme.campaign)["raters"]
    assert again["gold_accuracy"]["correct"] == 1 and counted["quality"] == 1


def test_rater_reports_are_cached_until_the_log_grows_and_flags_are_live(
    acme: Tenant, bob: User, counted: dict[str, int]
) -> None:
    vote_at(acme, rater=bob, left=acme.left, right=acme.right, at=NOW - timedelta(hours=1))
    [report] = rater_reports(campaign=acme.campaign)
    assert report.battles == 1 and not report.flagged
    RaterFlag.objects.create(organization=acme.organization, rater=bob, reason="checked by hand")
    [flagged] = rater_reports(campaign=acme.campaign)
    assert flagged.flagged and flagged.battles == 1  # the flag shows at once, from the cached figures
    assert counted["activity"] == 1
    vote_at(acme, rater=bob, left=acme.left, right=acme.right, at=NOW - timedelta(minutes=30))
    [grown] = rater_reports(campaign=acme.campaign)
    assert grown.battles == 2 and counted["activity"] == 2
    # Some raters only (a page of the API) read the campaign's one entry: nothing is computed again.
    assert rater_reports(campaign=acme.campaign, rater_ids=[]) == []
    assert [r.rater_id for r in rater_reports(campaign=acme.campaign, rater_ids=[bob.pk])] == [bob.pk]
    assert counted["activity"] == 2
