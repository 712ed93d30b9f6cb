"""Published boards: the publication at a slug (an anonymous visitor's credential) and everything its page
and its JSON show, read in the board's organisation's scope."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from battles.models import Prompt
from raters.tenancy import organization_scope, scopes_disabled

from ..models import BoardPublication
from .leaderboards import competitor_names, family_disclosure, snapshot_categories, snapshot_history, snapshot_rows


@dataclass(frozen=True)
class PublicBoard:
    """Everything a published board shows, read inside its organisation's scope and materialised, so
    that the page and the JSON render it with no scope open (the visitor has none)."""

    slug: str
    campaign_id: int
    campaign_name: str
    organization_name: str
    published_at: datetime
    show_prompts: bool
    category: str
    view: str
    categories: list[str]
    snapshot: dict[str, Any] | None  # version, created_at, votes, method, policy, excluded; no rows
    rows: list[dict[str, Any]]
    prompts: dict[str, Any] | None  # {"count", "offset", "limit", "results": [{"id", "category", "text"}]}
    families: dict[str, Any]  # ``family_disclosure``


PUBLIC_PROMPTS_PAGE = 100


def board_publication_by_slug(*, slug: str) -> BoardPublication | None:
    """The publication at ``slug``. The slug is the credential of an anonymous visitor, so this one
    lookup is made across tenants (like an API key's); everything else is read in the board's scope."""
    with scopes_disabled():
        return BoardPublication.objects.select_related("campaign", "organization").filter(slug=slug).first()


def public_board(*, slug: str, category: str = "", view: str = "raw", prompts_offset: int = 0) -> PublicBoard | None:
    """The published board at ``slug`` (None: unknown or unpublished): the newest snapshot of the
    selection, every competitor (retired ones marked), never a rater; the active pool prompts' texts
    (one page) only when the publication shows prompts."""
    publication = board_publication_by_slug(slug=slug)
    if publication is None:
        return None
    with organization_scope(publication.organization_id):
        campaign = publication.campaign
        # Not the stored matrices (megabytes at 200 competitors): a published board shows none of them.
        snapshot = (
            snapshot_history(campaign=campaign, category=category, view=view)
            .defer("pairwise", "pairwise_arrays")
            .first()
        )
        names = competitor_names(campaign=campaign)
        rows: list[dict[str, Any]] = []
        summary = None
        if snapshot is not None:
            rows = snapshot_rows(snapshot=snapshot, names=names)
            summary = {
                "version": snapshot.version,
                "created_at": snapshot.created_at,
                "votes_total": snapshot.votes_total,
                "votes_used": snapshot.votes_used,
                "method": snapshot.method,
                "policy": {k: v for k, v in snapshot.policy.items() if k not in ("flagged_raters", "flag_ids")},
                "flagged_raters": len(snapshot.policy.get("flagged_raters", [])),
                "excluded": snapshot.excluded,
                "components": snapshot.extra.get("components"),
                "interval_choice": snapshot.extra.get("interval_choice"),
            }
        prompts = None
        if publication.show_prompts:
            pool = Prompt.objects.filter(campaign=campaign, active=True, source=Prompt.Source.POOL).order_by("id")
            page = list(pool.values("id", "category", "text")[prompts_offset : prompts_offset + PUBLIC_PROMPTS_PAGE])
            prompts = {"count": pool.count(), "offset": prompts_offset, "limit": PUBLIC_PROMPTS_PAGE, "results": page}
        return PublicBoard(
            slug=publication.slug,
            campaign_id=campaign.pk,
            campaign_name=campaign.name,
            organization_name=publication.organization.name,
            published_at=publication.published_at,
            show_prompts=publication.show_prompts,
            category=category,
            view=view,
            categories=snapshot_categories(campaign=campaign),
            snapshot=summary,
            rows=rows,
            prompts=prompts,
            families=family_disclosure(campaign=campaign),
        )
