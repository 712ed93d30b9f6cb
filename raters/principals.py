"""Who a request's person is, read once per change rather than once per request (core.cached).

The session's user and the organisations of their memberships (the tenant scope) were two ORM statements on
every request of a rater's cycle. Both now come from the shared cache, and are dropped by the receivers
below the moment a user or a membership is saved or deleted, so a deactivated account, a changed password
(the session hash is checked against the user as now saved) or a removed membership takes effect on the
next request, in every process.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY, load_backend
from django.contrib.auth.models import AnonymousUser, User
from django.db.models.signals import post_delete, post_save
from django.dispatch import receiver
from django.http import HttpRequest
from django.utils.crypto import constant_time_compare

from core.cached import cached_fact, cached_fact_drop

from .hooks import user_fact_keys
from .models import Membership
from .tenancy import organizations_key


def user_key(user_id: Any) -> str:
    return f"arena:fact:user:{user_id}"


def user_facts_along(user_id: Any) -> list[str]:
    """The keys of every fact a request of this user reads after its session: the user, their organisations,
    and those of the apps above (``raters.hooks.user_fact_keys``)."""
    return [user_key(user_id), organizations_key(user_id), *user_fact_keys(user_id)]


def session_user(request: HttpRequest) -> User | AnonymousUser:
    """``django.contrib.auth.get_user`` with the user from the cache: the same session checks (the backend
    named in the session must be configured; the session hash must match the user's password as now saved,
    or one made with a fallback secret key, which rotates the session), the same outcome."""
    try:
        user_id = User._meta.pk.to_python(request.session[SESSION_KEY])
        backend_path = request.session[BACKEND_SESSION_KEY]
    except KeyError:
        return AnonymousUser()
    if backend_path not in settings.AUTHENTICATION_BACKENDS:
        return AnonymousUser()
    backend = load_backend(backend_path)
    # The backend's answer, None for an inactive account, is what is kept (every backend here is a ModelBackend).
    # The request's other facts of this user (its organisations, and those of the apps above) come in the same
    # round trip.
    user: Any = cached_fact(
        user_key(user_id),
        lambda: backend.get_user(user_id),
        along=user_facts_along(user_id)[1:],
    )
    if user is None or not hasattr(user, "get_session_auth_hash"):
        return user or AnonymousUser()
    session_hash = request.session.get(HASH_SESSION_KEY)
    session_auth_hash = user.get_session_auth_hash()
    if session_hash and constant_time_compare(session_hash, session_auth_hash):
        return user  # type: ignore[no-any-return]
    if session_hash and any(
        constant_time_compare(session_hash, fallback) for fallback in user.get_session_auth_fallback_hash()
    ):
        request.session.cycle_key()
        request.session[HASH_SESSION_KEY] = session_auth_hash
        return user  # type: ignore[no-any-return]
    request.session.flush()
    return AnonymousUser()


@receiver(post_save, sender=User, dispatch_uid="raters.principals.user_saved")
@receiver(post_delete, sender=User, dispatch_uid="raters.principals.user_deleted")
def user_changed(sender: Any, instance: User, **kwargs: Any) -> None:
    cached_fact_drop(user_key(instance.pk), organizations_key(instance.pk))


@receiver(post_save, sender=Membership, dispatch_uid="raters.principals.membership_saved")
@receiver(post_delete, sender=Membership, dispatch_uid="raters.principals.membership_deleted")
def membership_changed(sender: Any, instance: Membership, **kwargs: Any) -> None:
    cached_fact_drop(organizations_key(instance.user_id))
