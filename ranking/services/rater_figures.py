"""The per-rater figures (the managers' dashboard, its CSV, the rater-report API): stale-while-revalidate.

Computing them reads the whole log (about 1 s at a million votes on PostgreSQL, from one packed read; 23 s
when they were SQL sorts), and any new vote changes them. A view
that finds them cached for the log as it stands uses them; one that finds only older ones (the latest
computed) serves those, labelled with their age, and queues one refresh; with nothing cached, or with
no broker to queue on, the request computes them itself."""

from __future__ import annotations

import logging
import time
import uuid
from typing import Any

from celery import shared_task
from django.core.cache import cache
from kombu.exceptions import OperationalError as KombuOperationalError
from redis.exceptions import RedisError

from battles.models import Campaign
from battles.selectors import campaign_organization_id
from core.slots import lease_release
from raters.tenancy import TenantTask

from .. import selectors

logger = logging.getLogger(__name__)

# A queued or running refresh holds this lock, so that many views queue one task; a refresh whose worker
# died frees it after this long (a view then queues another). Longer than a refresh at a million votes.
RATER_REFRESH_LOCK_S = 120


def _rater_refresh_key(campaign_id: int) -> str:
    return f"ranking:rater-figures-refresh:{campaign_id}"


def rater_figures_refresh_schedule(*, campaign_id: int, organization_id: int | None = None) -> bool:
    """Queue one refresh of the campaign's per-rater figures unless one is queued or running already (the
    lock, taken with ``cache.add``). Returns whether this call queued it. Raises if the broker refuses the
    task, after releasing the lock so that the next view tries again."""
    token = uuid.uuid4().hex
    if not cache.add(_rater_refresh_key(campaign_id), token, timeout=RATER_REFRESH_LOCK_S):
        return False
    try:
        rater_figures_refresh_task.delay(
            campaign_id, organization_id=organization_id or campaign_organization_id(campaign_id), lock=token
        )
    except Exception:
        lease_release(_rater_refresh_key(campaign_id), token)
        raise
    return True


def rater_figures_refresh(*, campaign_id: int, lock: str | None = None) -> int | None:
    """What the refresh task runs: the campaign's per-rater figures for the log as it stands, stored under
    its state and as the latest (nothing to do when they are cached already); then the lock is released.
    Returns the votes they stand on, or None for a campaign that is gone.

    ``lock``: the token the scheduling stored in the lock; only that lock is released, so a refresh that
    outlived it leaves alone the lock of the refresh queued since (else a third would run beside that one).
    Without it (a task queued by an earlier version) the lock is released whatever it holds."""
    try:
        campaign = Campaign.objects.filter(pk=campaign_id).first()
        if campaign is None:
            return None
        figures, mark = selectors.rater_figures_cached(campaign=campaign)
        if figures is None or figures.mark != mark:
            started = time.perf_counter()
            figures = selectors.rater_figures_compute(campaign=campaign)
            logger.info(
                "campaign %s: per-rater figures over %s votes in %.2f s",
                campaign_id,
                figures.votes,
                time.perf_counter() - started,
            )
        return figures.votes
    finally:
        if lock is not None:
            lease_release(_rater_refresh_key(campaign_id), lock)
        else:
            cache.delete(_rater_refresh_key(campaign_id))


@shared_task(base=TenantTask, acks_late=True, name="ranking.tasks.rater_figures_refresh_task")
def rater_figures_refresh_task(campaign_id: int, *, organization_id: int, lock: str | None = None) -> int | None:
    """The per-rater figures for the log as it stands (queued by a view that served older ones, and after
    each recompute); returns the votes they stand on. ``lock``: the refresh lock's token (released by it only)."""
    return rater_figures_refresh(campaign_id=campaign_id, lock=lock)


def _rater_figures_warm(campaign_id: int) -> None:
    """After a recompute: refresh the per-rater figures of a campaign whose figures someone looked at
    lately (a latest entry exists), so that the next view finds them current. Never fails the recompute."""
    try:
        if selectors.rater_figures_viewed(campaign_id=campaign_id):
            rater_figures_refresh_schedule(campaign_id=campaign_id)
    except Exception:
        logger.warning("campaign %s: the per-rater figures' refresh was not queued", campaign_id, exc_info=True)


def rater_reports_serve(
    *, campaign: Campaign, rater_ids: list[int] | None = None, log: dict[str, Any] | None = None
) -> selectors.RaterReports:
    """The rater reports for a view (the dashboard, the API): the figures from the log cached for its
    current state; else the latest ones computed (labelled: ``as_of``, ``votes_behind``, ``refreshing``)
    while one refresh is queued; else (nothing cached, or the broker down) computed in the request, as
    current. Gold accuracy, flags and names are always read afresh. (The CSV wants the log as it stands:
    ``selectors.rater_reports``.) ``log``: the log as the dashboard read it (``selectors.dashboard_log``,
    PostgreSQL): its mark is not read again, and figures computed here are computed from it."""
    known = selectors.log_mark_of(log) if log is not None else None
    figures, mark = selectors.rater_figures_cached(campaign=campaign, mark=known)
    refreshing = False
    if figures is not None and figures.mark != mark:
        try:
            rater_figures_refresh_schedule(campaign_id=campaign.pk, organization_id=campaign.organization_id)
        except (KombuOperationalError, RedisError, OSError):
            logger.error(
                "campaign %s: the per-rater figures' refresh could not be queued (broker down): computed in "
                "the request",
                campaign.pk,
                exc_info=True,
            )
            figures = None
        else:
            # Where tasks run eagerly (no broker configured) the refresh has run already.
            current = selectors.rater_figures_at(campaign=campaign, mark=mark)
            figures, refreshing = (current, False) if current is not None else (figures, True)
    if figures is None:
        figures = selectors.rater_figures_compute(campaign=campaign, log=log)
        mark = figures.mark
    return selectors.rater_reports_of(
        campaign=campaign, figures=figures, log_votes=int(mark[0]), refreshing=refreshing, rater_ids=rater_ids
    )
