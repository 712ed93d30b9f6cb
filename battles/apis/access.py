"""Who is asking, and the campaign they may read or write: the lookups every resource module starts from
(each answers 404 for another organisation's campaign)."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.http import Http404
from rest_framework.exceptions import NotFound as ApiNotFound
from rest_framework.request import Request

from core.errors import NotFound
from raters.authentication import ApiKeyPrincipal

from .. import selectors
from ..models import Campaign


def _principal(request: Request) -> User | ApiKeyPrincipal:
    user = request.user
    # The API's default permission lets only a signed-in user or an API key through.
    assert isinstance(user, (User, ApiKeyPrincipal))
    return user


def _campaign(request: Request, campaign_id: int) -> Campaign:
    campaign = selectors.campaign_viewable_by(user=_principal(request), campaign_id=campaign_id)
    if campaign is None:
        raise Http404("No such campaign.")
    return campaign


def _viewable_campaign(request: Request, campaign_id: int) -> Campaign:
    user = request.user
    assert isinstance(user, (User, ApiKeyPrincipal))  # ScopedAccess let only these through
    campaign = selectors.campaign_viewable_by(user=user, campaign_id=campaign_id)
    if campaign is None:
        raise NotFound("No such campaign.")
    return campaign


def _writable_campaign(request: Request, campaign_id: int) -> Campaign:
    campaign = selectors.campaign_writable_by(user=_principal(request), campaign_id=campaign_id)
    if campaign is None:
        raise ApiNotFound("No such campaign.")
    return campaign
