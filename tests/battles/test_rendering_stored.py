"""An answer is rendered once, when it is stored, and its page shows that rendering (battles.rendering):
the same HTML as rendering the text on the view, cleaned again on the way out, and rendered anew from the
text where the renderer that made it was another."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from hypothesis import given, settings
from hypothesis import strategies as st

from battles import services
from battles.models import Battle, Generation
from battles.rendering import (
    BLANK_ANSWER_HTML,
    RENDERER_VERSION,
    answer_html,
    answer_rendered,
    answer_to_safe_html,
    markdown_to_safe_html,
)
from tests.battles.test_identity_refuse import _answers, ready_battle
from tests.battles.test_rendering import XSS_PAYLOADS, assert_safe
from tests.conftest import Tenant
from tests.planting import planting

ANSWER = "# Rivers\n\n**Rivers** flow.\n\n- one\n- two\n\n| a | b |\n|:-|-:|\n| 1 | 2 |\n\n[x](https://example.com)"


@pytest.mark.parametrize("text", [ANSWER, "", "   \n\n ", "plain", *XSS_PAYLOADS])
def test_the_stored_rendering_shows_what_rendering_the_text_would(text: str) -> None:
    stored = answer_rendered(text)
    assert stored["text_html_version"] == RENDERER_VERSION
    assert answer_html(text, **stored) == answer_to_safe_html(text)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_any_stored_rendering_is_the_rendering_of_its_text(text: str) -> None:
    assert answer_html(text, **answer_rendered(text)) == answer_to_safe_html(text)


def test_a_rendering_of_another_renderer_is_not_shown_and_a_stored_string_is_cleaned_on_the_way_out() -> None:
    # Another renderer's (a release before, or none: a row written without it): the text is rendered now.
    assert answer_html(ANSWER, "<p>from an old renderer</p>", "0" * 16) == answer_to_safe_html(ANSWER)
    assert answer_html(ANSWER, "<p>never rendered</p>", "") == answer_to_safe_html(ANSWER)
    # This renderer's version, with markup no renderer writes: what reaches the page is still clean.
    tampered = (
        '<p onclick="alert(1)">x</p><script>alert(2)</script><img src=x onerror=alert(3)><a href="javascript:1">y</a>'
    )
    shown = answer_html("x y", tampered, RENDERER_VERSION)
    assert_safe(shown)
    assert "x" in shown and "alert" not in shown
    # An answer with no visible text is said to be empty, from the stored rendering too.
    assert answer_html(" ", **answer_rendered(" ")) == BLANK_ANSWER_HTML


@pytest.mark.django_db
def test_the_worker_stores_each_answer_rendered_and_the_page_shows_the_stored_rendering(
    acme: Tenant, bob: User, bob_client: Client
) -> None:
    battle = ready_battle(acme, bob)
    Battle.objects.filter(pk=battle.pk).update(status=Battle.Status.GENERATING, shown_at=None, ready_at=None)
    with planting():  # back to before the answers arrived
        Generation.objects.filter(battle=battle).delete()
    left, right = _answers(ANSWER, "Water **runs**.")
    assert services.battle_generations_record(battle=battle, left=left, right=right).status == Battle.Status.READY
    stored = {g.side: g for g in Generation.objects.filter(battle=battle)}
    assert stored["left"].text_html == markdown_to_safe_html(ANSWER)
    assert stored["right"].text_html == markdown_to_safe_html("Water **runs**.")
    assert {g.text_html_version for g in stored.values()} == {RENDERER_VERSION}

    page = reverse("battles:battle", args=[battle.pk])
    html = bob_client.get(page).content.decode()
    assert markdown_to_safe_html(ANSWER) in html and "<strong>runs</strong>" in html
    # The page reads the stored rendering, not the text: a stored string it shows proves it (planted: answers
    # are written once, and a rendering is never rewritten).
    with planting():
        Generation.objects.filter(battle=battle, side="right").update(text_html="<p>the stored rendering</p>")
    html = bob_client.get(page).content.decode()
    assert "<p>the stored rendering</p>" in html and "<strong>runs</strong>" not in html
    # ...unless another renderer made it: then the text is rendered.
    with planting():
        Generation.objects.filter(battle=battle, side="right").update(text_html_version="0" * 16)
    html = bob_client.get(page).content.decode()
    assert "the stored rendering" not in html and "<strong>runs</strong>" in html
