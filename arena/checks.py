"""Deployment checks of the project's own settings (``manage.py check --deploy``)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import Tags, Warning, register


@register(Tags.security, deploy=True)
def signup_enumeration_check(app_configs: Any, **kwargs: Any) -> list[Warning]:
    if settings.ACCOUNT_EMAIL_VERIFICATION != "mandatory":
        return [
            Warning(
                f"ACCOUNT_EMAIL_VERIFICATION is {settings.ACCOUNT_EMAIL_VERIFICATION!r}: sign-up tells whether an "
                "e-mail address is registered.",
                hint="Use the production default, mandatory.",
                id="arena.W001",
            )
        ]
    return []
