"""A campaign's identity policy: under "refuse", a prompt that asks a model who it is and an answer
that names a model or its vendor are never shown (the comparison is blind). The predicate, and what
the rater is told."""

from __future__ import annotations

from ..models import Campaign

# What the rater is told, in the page, the console's words and the API alike.
IDENTITY_QUESTION_REFUSED = (
    "This campaign does not let the models answer questions about who they are (which model, which "
    "company): the comparison is blind, so neither model was asked. Please write a different prompt."
)
IDENTITY_ANSWER_VOIDED = (
    "One of the answers named a model or the company behind it, which this campaign does not allow (the "
    "comparison is blind): the battle was voided and its answers are not shown. Nothing was recorded as a vote."
)


def identity_refused(campaign: Campaign) -> bool:
    return campaign.identity_policy == Campaign.IdentityPolicy.REFUSE
