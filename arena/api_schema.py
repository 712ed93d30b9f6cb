"""The OpenAPI schema's project-wide parts: the API-key security scheme and the error responses of every
operation (drf-spectacular's ``DEFAULT_SCHEMA_CLASS``)."""

from __future__ import annotations

from typing import Any, Literal

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.openapi import AutoSchema

from core.api import ErrorOutput


class ApiKeyScheme(OpenApiAuthenticationExtension):  # type: ignore[no-untyped-call]
    target_class = "raters.authentication.ApiKeyAuthentication"
    name = "ApiKey"

    def get_security_definition(self, auto_schema: AutoSchema) -> dict[str, str]:
        return {
            "type": "apiKey",
            "in": "header",
            "name": "Authorization",
            "description": "`Authorization: Api-Key arena_<prefix>_<secret>` — an organisation's key "
            "(console → API keys). Scopes read < write < owner, never above the maker's role: read keys get 403 "
            "on writes, read and write keys 403 on webhooks (owner keys only).",
        }


class ArenaAutoSchema(AutoSchema):
    """Adds the refusals every operation can give, in the one error body, so that clients (and the
    schemathesis run in the suite) know every response's shape."""

    def _get_response_bodies(self, direction: Literal["request", "response"] = "response") -> dict[str, Any]:
        responses: dict[str, Any] = super()._get_response_bodies(direction)
        errors = {
            "400": "Invalid input (the fields say which).",
            "401": "No credentials, or a revoked or unknown key.",
            "403": "Authenticated but not allowed (a read-only key writing; a read or write key on webhooks).",
            "404": "No such object, or not one of your organisation's.",
            "429": "Too many requests for this key; retry after the Retry-After header.",
        }
        if self.method in ("POST", "PUT", "PATCH"):
            errors["413"] = "The request body is over the size limit."
            errors["415"] = "Unsupported content type."
        for status, description in errors.items():
            if status not in responses:
                response = self._get_response_for_code(ErrorOutput, status)  # type: ignore[no-untyped-call]
                response["description"] = description
                responses[status] = response
        return responses

    def get_serializer_name(self, serializer: Any, direction: str) -> str:
        """Component names clients will read in generated code: ``CampaignOutput`` → ``Campaign``, and a
        serializer nested in its view (``CampaignListApi.OutputSerializer``) → ``CampaignList``, so that the
        many nested ``OutputSerializer`` classes do not collide under one name."""
        parts = type(serializer).__qualname__.split(".")
        name = parts[-1].removesuffix("Serializer")
        if len(parts) > 1:
            name = parts[-2].removesuffix("Api") + name
        if name.endswith("Output") and len(name) > len("Output"):
            name = name.removesuffix("Output")
        return name
