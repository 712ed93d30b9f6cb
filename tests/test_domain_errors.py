"""Services' refusals (core.errors) are mapped once per edge: HTML views, the REST API, the console."""

from __future__ import annotations

import pytest
from django.http import Http404
from django.test import RequestFactory
from rest_framework.test import APIRequestFactory, force_authenticate
from rest_framework.views import APIView

from core.errors import Conflict, DomainError, Invalid, LimitReached, NotFound, PermissionDenied
from core.http import error_response, status_for


@pytest.mark.parametrize(
    ("error", "status"),
    [
        (NotFound("x"), 404),
        (PermissionDenied("x"), 403),
        (Invalid("x"), 400),
        (Conflict("x"), 409),
        (LimitReached("x"), 429),
        (DomainError("x"), 400),
    ],
)
def test_each_kind_of_refusal_has_one_status(error: DomainError, status: int) -> None:
    assert status_for(error) == status


def test_field_errors_are_lists() -> None:
    error = Invalid("bad", field_errors={"members": "not a member", "text": ["too long", "empty"]})
    assert error.message == "bad" and str(error) == "bad"
    assert error.field_errors == {"members": ["not a member"], "text": ["too long", "empty"]}


def test_an_html_view_shows_the_message_with_its_status_and_not_found_is_the_plain_404(db: None) -> None:
    request = RequestFactory().get("/")
    response = error_response(request, Conflict("Your first vote stands."))
    assert response.status_code == 409 and "Your first vote stands." in response.content.decode()
    with pytest.raises(Http404):
        error_response(request, NotFound("No such battle."))


class _Refusing(APIView):
    error: DomainError = Conflict("already done")

    def post(self, request):  # type: ignore[no-untyped-def]
        raise self.error


@pytest.mark.parametrize(
    ("error", "status"),
    [
        (Conflict("already done"), 409),
        (NotFound("No such campaign."), 404),
        (Invalid("bad prompt", field_errors={"text": "too long"}), 400),
    ],
)
def test_the_api_answers_json_with_the_status(alice, error: DomainError, status: int) -> None:
    request = APIRequestFactory().post("/api/v1/x/")
    force_authenticate(request, user=alice)
    response = _Refusing.as_view(error=error)(request)
    assert response.status_code == status
    assert response.data["error"]["message"] == error.message
    assert response.data["error"]["code"] == {409: "conflict", 404: "not_found", 400: "invalid"}[status]
    assert response.data["error"]["fields"] == error.field_errors
