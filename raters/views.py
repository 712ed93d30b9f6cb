from __future__ import annotations

from typing import cast

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.http import urlencode

from core.errors import DomainError
from core.http import AuthenticatedHttpRequest, error_response

from . import selectors, services
from .models import Invitation
from .signals import PENDING_INVITATION_SESSION_KEY
from .tenancy import organization_scope


def _invitation_problem(invitation: Invitation) -> str | None:
    """Why the link cannot be used now, said before a visitor signs up for nothing."""
    if invitation.expires_at <= timezone.now():
        return "This invitation link has expired. Ask your manager for a new one."
    if invitation.uses >= invitation.max_uses:
        return "This invitation link has already been used. Ask your manager for a new one."
    return None


def invitation_accept(request: HttpRequest, token: str) -> HttpResponse:
    """GET shows what the link is for; POST joins. A GET never changes anything (link previews).

    Someone logged out sees the organisation and the pool, and chooses to sign up or log in; that POST
    keeps the token in their session, and logging in (which signing up does) joins the pool
    (``raters.signals``), so there is no second click. The token is kept only on that POST, never on a
    GET, so another site cannot plant an invitation in a visitor's session with a link or an image."""
    invitation = selectors.invitation_by_token(token)
    if invitation is None:
        return render(
            request,
            "battles/message.html",
            {"title": "Invitation", "message": "This invitation link is not valid."},
            status=404,
        )
    if not request.user.is_authenticated:
        return _invitation_for_visitor(request, invitation)
    request = cast(AuthenticatedHttpRequest, request)
    if request.method == "POST":
        # The link is the credential: accepting it works inside the invitation's organisation.
        with organization_scope(invitation.organization_id):
            try:
                pool = services.invitation_accept(token=token, user=request.user)
            except DomainError as exc:
                return error_response(request, exc, "battles/message.html", {"title": "Invitation"})
        messages.success(request, f"You joined {pool.name} of {pool.organization.name}.")
        return redirect("battles:campaigns")
    return render(request, "raters/invitation.html", {"invitation": invitation})


def _invitation_for_visitor(request: HttpRequest, invitation: Invitation) -> HttpResponse:
    problem = _invitation_problem(invitation)
    if request.method == "POST" and problem is None:
        request.session[PENDING_INVITATION_SESSION_KEY] = invitation.token
        then = "account_login" if request.POST.get("then") == "login" else "account_signup"
        messages.info(request, f"Once you are in, you join {invitation.pool.name} of {invitation.organization.name}.")
        return redirect(f"{reverse(then)}?{urlencode({'next': reverse('battles:campaigns')})}")
    return render(
        request,
        "raters/invitation.html",
        {"invitation": invitation, "visitor": True, "problem": problem},
        status=200 if problem is None else 410,
    )
