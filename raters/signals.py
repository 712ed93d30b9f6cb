"""Invitations carried through sign-up and login; the keys of a deleted account revoked.

A visitor who chose "Sign up and join" (or "Log in and join") on an invitation page has its token in
the session; when that person logs in, which allauth does at the end of a sign-up, they join the pool.
Django's ``user_logged_in`` is the hook because it fires only once the person is really in: with
``ACCOUNT_EMAIL_VERIFICATION=mandatory`` that is after the address is confirmed, so an invitation
meant for one address cannot be taken by signing up with it unconfirmed."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.models import User
from django.contrib.auth.signals import user_logged_in
from django.db.models.signals import post_delete, post_save, pre_delete
from django.dispatch import receiver
from django.http import HttpRequest

from core.cached import cached_fact_drop
from core.errors import DomainError

from . import selectors, services
from .models import WebhookEndpoint
from .services.webhooks import webhook_events_key
from .tenancy import organization_scope

PENDING_INVITATION_SESSION_KEY = "arena.invitation_token"


@receiver(user_logged_in, dispatch_uid="raters.invitation_accept_pending")
def invitation_accept_pending(sender: Any, request: HttpRequest | None, user: User, **kwargs: Any) -> None:
    session = getattr(request, "session", None)
    if request is None or session is None:
        return
    token = session.pop(PENDING_INVITATION_SESSION_KEY, None)
    if not isinstance(token, str) or not token:
        return
    invitation = selectors.invitation_by_token(token)
    if invitation is None:  # deleted since it was chosen
        messages.error(request, "Your invitation link is no longer valid.", fail_silently=True)
        return
    # The login request's scope is the visitor's (no organisation); the link is the credential, so
    # accepting it works inside the invitation's organisation, as the invitation view does.
    with organization_scope(invitation.organization_id):
        try:
            pool = services.invitation_accept(token=token, user=user)
        except DomainError as exc:
            messages.error(request, f"Your invitation could not be used: {exc.message}", fail_silently=True)
            return
        pool_name, organization_name = pool.name, pool.organization.name
    messages.success(request, f"You joined {pool_name} of {organization_name}.", fail_silently=True)


@receiver(pre_delete, sender=User, dispatch_uid="raters.api_keys_revoke_made_by")
def api_keys_revoke_of_deleted_user(sender: Any, instance: User, **kwargs: Any) -> None:
    """A key never exceeds its maker, checked at every use against the maker's role; once the account is
    deleted the key's maker is forgotten (``created_by`` is set to null), so its keys are revoked first."""
    services.api_keys_revoke_made_by(user=instance)


@receiver(post_save, sender=WebhookEndpoint, dispatch_uid="raters.webhook_events_saved")
@receiver(post_delete, sender=WebhookEndpoint, dispatch_uid="raters.webhook_events_deleted")
def webhook_events_changed(sender: Any, instance: WebhookEndpoint, **kwargs: Any) -> None:
    """The events an organisation's webhooks subscribe to are kept in the shared cache (every vote asks):
    an endpoint saved or deleted, by the console, the API or a cascade, drops them."""
    cached_fact_drop(webhook_events_key(instance.organization_id))
