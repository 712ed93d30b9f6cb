"""The domain errors of the battles app (``core.errors`` subclasses): services raise them, the
edges (views, the API's exception handler, the admin) map them to pages and statuses."""

from __future__ import annotations

from core.errors import Conflict, Invalid, LimitReached, NotFound, PermissionDenied

# The refusals of this app, as domain errors (core.errors): the edges map them to pages and statuses.


class NotAllowed(NotFound):
    """Not a campaign or battle of this rater's (indistinguishable from a missing one)."""


class CapReached(LimitReached):
    """The rater has rated as much as the campaign allows, in this session or in all. The rater pages
    show it as the normal end of a stint (a thank-you, not an error page, and not a 429: that is for
    rate limits)."""


class PromptCapReached(Conflict):
    """A typed prompt whose text has been rated as often as the campaign allows (the rater's session
    and caps are fine: another prompt may be used at once)."""


class NothingToRate(Conflict):
    pass


class VoteRejected(Conflict):
    pass


class RaterBlocked(PermissionDenied):
    """The rater failed too many attention checks in this campaign (and is flagged)."""


class PromptsNotAccepted(PermissionDenied):
    pass


class IdentityQuestionRefused(Invalid):
    """Under the campaign's "refuse" identity policy: a typed prompt or turn that asks a model who it
    is. Refused before anything is stored or generated (no battle, no model called, no vote)."""


class QualificationFailed(PermissionDenied):
    """The rater did not pass the campaign's qualification: no real battle here, and they are told."""


class CampaignClosed(Conflict):
    pass


class ContinueRefused(Conflict):
    pass


class IdempotencyConflict(Conflict):
    """An idempotency key already used with another request body."""


class ExperimentInactive(Conflict):
    pass


class ParticipantInAnotherStudy(Conflict):
    """The vendor id already took part in another study of the same campaign: a second participation
    would be a second account voting on the same battles (its votes counted twice, its caps fresh)."""


class JudgeUnusable(Invalid):
    pass
