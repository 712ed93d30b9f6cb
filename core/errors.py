"""Domain errors: what a service refuses, in words for the person, with no HTTP in sight.

Services raise these; each edge maps them once: HTML views through ``core.http.error_response``
(the status from ``core.http.status_for``; ``NotFound`` is the plain 404), the REST API through
``core.http.api_exception_handler`` (DRF's ``EXCEPTION_HANDLER``), and the console through
``raters.admin.TenantAdmin`` (form errors and messages). They live in ``core``, below every app, so that every
app can raise them without importing another one."""

from __future__ import annotations

from collections.abc import Mapping, Sequence


class DomainError(Exception):
    """A request that cannot be carried out. ``message`` is shown to the person; ``field_errors``
    names the inputs at fault (the admin shows them on those fields, the API returns them)."""

    def __init__(self, message: str, *, field_errors: Mapping[str, str | Sequence[str]] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field_errors: dict[str, list[str]] = {
            name: [errors] if isinstance(errors, str) else list(errors) for name, errors in (field_errors or {}).items()
        }


class NotFound(DomainError):
    """No such thing, or not one of yours: the two are indistinguishable on purpose."""


class PermissionDenied(DomainError):
    """The person may see the thing but not do this to it."""


class Invalid(DomainError):
    """The input breaks a rule (a prompt too long, a pool of another organisation)."""


class Conflict(DomainError):
    """The state of things refuses the change (already voted, has battles, the last owner)."""


class LimitReached(DomainError):
    """A quota is used up (a session, rater or prompt cap)."""
