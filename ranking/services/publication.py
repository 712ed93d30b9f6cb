"""Published boards: publish a campaign's leaderboard at a random address (or change its options), and
take it off again. Audited."""

from __future__ import annotations

import secrets

from django.contrib.auth.models import User
from django.db import transaction

from battles.models import Campaign
from raters.models import AuditAction
from raters.services import audit_record

from ..models import BoardPublication


def board_slug_new() -> str:
    """A published board's address: 96 random bits, the only secret an unpublished-but-bookmarked board
    relies on (leaderboards here, attribute boards in ``attribute_boards``)."""
    return secrets.token_urlsafe(12)


@transaction.atomic
def board_publish(
    *,
    campaign: Campaign,
    actor: User | None,
    show_prompts: bool = False,
    listed: bool = False,
    via: str = "console",
) -> tuple[BoardPublication, bool]:
    """Publish the campaign's leaderboard at a new random address, or change the options of the
    existing publication (its address stays). Returns the publication and whether it is new. One
    audit row either way; ``actor`` is None for an API key (``via`` then names the key). ``listed``: the
    board also appears in the public index of published boards (otherwise only its address finds it)."""
    # The campaign row lock settles two publishes racing: the second sees the first's row.
    Campaign.objects.select_for_update().filter(pk=campaign.pk).first()
    publication = BoardPublication.objects.filter(campaign=campaign).first()
    created = publication is None
    if publication is None:
        publication = BoardPublication.objects.create(
            organization_id=campaign.organization_id,
            campaign=campaign,
            slug=board_slug_new(),
            published_by=actor,
            show_prompts=show_prompts,
            listed=listed,
        )
    elif (publication.show_prompts, publication.listed) != (show_prompts, listed):
        publication.show_prompts, publication.listed = show_prompts, listed
        publication.save(update_fields=["show_prompts", "listed"])
    audit_record(
        organization=campaign.organization,
        actor=actor,
        action=AuditAction.BOARD_PUBLISHED,
        obj=campaign,
        data={"slug": publication.slug, "show_prompts": show_prompts, "listed": listed, "new": created, "via": via},
    )
    return publication, created


@transaction.atomic
def board_unpublish(*, campaign: Campaign, actor: User | None, via: str = "console") -> bool:
    """Take the campaign's board off its public address (the address then answers 404 and is never
    reused). Returns whether there was a publication."""
    publication = BoardPublication.objects.select_for_update().filter(campaign=campaign).first()
    if publication is None:
        return False
    slug = publication.slug
    publication.delete()
    audit_record(
        organization=campaign.organization,
        actor=actor,
        action=AuditAction.BOARD_UNPUBLISHED,
        obj=campaign,
        data={"slug": slug, "via": via},
    )
    return True
