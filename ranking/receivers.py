"""The ranking app's subscriptions to the apps below it: whatever changes which votes count, or how
they are ranked, schedules a recompute. Connected in ``RankingConfig.ready``; each runs after the
change committed (``raters.hooks.send_on_commit``)."""

from __future__ import annotations

from typing import Any

from battles import hooks as battle_hooks
from raters import hooks as rater_hooks

from . import selectors, services, tasks


def on_vote_stored(*, campaign_id: int, organization_id: int | None = None, **kwargs: Any) -> None:
    services.leaderboards_schedule(campaign_id=campaign_id, organization_id=organization_id)


def on_leaderboards_stale(*, campaign_id: int, now: bool = False, **kwargs: Any) -> None:
    if now:
        services.leaderboards_recompute_soon(campaign_id=campaign_id)
    else:
        services.leaderboards_schedule(campaign_id=campaign_id)


def on_rater_flag_changed(*, organization_id: int, rater_id: int, **kwargs: Any) -> None:
    for campaign_id in selectors.campaigns_voted_in(organization_id=organization_id, rater_id=rater_id):
        services.leaderboards_schedule(campaign_id=campaign_id)


def on_judge_run_finished(*, run_id: int, organization_id: int, **kwargs: Any) -> None:
    # The judge's board and calibration, off the judging worker's path.
    tasks.judge_run_settle_task.delay(run_id, organization_id=organization_id)


def connect() -> None:
    battle_hooks.judge_run_finished.connect(on_judge_run_finished, dispatch_uid="ranking.judge_run_finished")
    battle_hooks.vote_stored.connect(on_vote_stored, dispatch_uid="ranking.vote_stored")
    battle_hooks.leaderboards_stale.connect(on_leaderboards_stale, dispatch_uid="ranking.leaderboards_stale")
    rater_hooks.rater_flag_changed.connect(on_rater_flag_changed, dispatch_uid="ranking.rater_flag_changed")
    battle_hooks.interval_source_register(selectors.current_intervals)
    export_kinds_register()


def export_kinds_register() -> None:
    """Preference pairs need the exclusion policy, which ranking owns: the async export (a battles
    task) writes them through this registration."""
    battle_hooks.export_kind_register(
        "preference_pairs",
        battle_hooks.ExportKind(
            rows=lambda campaign, filters: selectors.preference_pairs(campaign=campaign, filters=filters),
            audit=lambda campaign, filters: selectors.preference_pairs_audit(campaign=campaign, filters=filters),
        ),
    )
