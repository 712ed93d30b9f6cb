"""Two small helpers that two modules of the package share each: a campaign's organisation (the tenant
scope a queued task runs in) and a published board's random address."""

from __future__ import annotations

import secrets

from battles.models import Campaign


def _organization_of(campaign_id: int) -> int:
    return Campaign.objects.values_list("organization_id", flat=True).get(pk=campaign_id)


def _board_slug() -> str:
    # 96 random bits: the address is the only secret an unpublished-but-bookmarked board relies on.
    return secrets.token_urlsafe(12)
