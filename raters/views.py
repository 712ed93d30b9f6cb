from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import redirect, render

from arena.http import AuthenticatedHttpRequest, error_response

from . import selectors, services
from .errors import DomainError
from .tenancy import organization_scope


@login_required
def invitation_accept(request: AuthenticatedHttpRequest, token: str) -> HttpResponse:
    """GET shows what the link is for; POST joins. A GET never changes anything (link previews)."""
    invitation = selectors.invitation_by_token(token)
    if invitation is None:
        return render(request, "battles/message.html",
                      {"title": "Invitation", "message": "This invitation link is not valid."}, status=404)
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
