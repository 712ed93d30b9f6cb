"""An answer with no visible text (empty, or blank lines only: a sampled model sends such answers) is shown as
what it is, in words, the same for either side; the other pane shows its answer as usual. Through the page,
an earlier turn's history, and the live stream's final render."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from battles.models import Generation, Turn
from battles.rendering import BLANK_ANSWER_HTML, answer_to_safe_html
from battles.views import _battle_complete
from tests.battles.test_identity_refuse import ready_battle
from tests.conftest import Tenant

pytestmark = pytest.mark.django_db


def _panes(page: str) -> dict[str, str]:
    """Each current pane's body, by its label."""
    panes = {}
    for label in ("A", "B"):
        start = page.index(f'id="pane-{label}"')
        panes[label] = page[start : page.index("</article>", start)]
    return panes


@pytest.mark.parametrize("blank", ["", "\n \n \n ", "   "])
def test_the_blank_answer_says_so_and_the_other_shows_its_text(
    acme: Tenant, bob: User, bob_client: Client, blank: str
) -> None:
    battle = ready_battle(acme, bob, answers=("Rivers flow.", blank))
    panes = _panes(bob_client.get(reverse("battles:battle", args=[battle.pk])).content.decode())
    assert BLANK_ANSWER_HTML in panes["B"]
    assert BLANK_ANSWER_HTML not in panes["A"] and "Rivers flow." in panes["A"]
    # The live stream's last event renders both the same way.
    complete = _battle_complete(battle.pk)
    assert complete["b"] == BLANK_ANSWER_HTML and "Rivers flow." in str(complete["a"])


def test_the_notice_is_the_same_for_either_side_and_only_for_blank_answers(
    acme: Tenant, bob: User, bob_client: Client
) -> None:
    battle = ready_battle(acme, bob, answers=("\n\n", "Water runs."))
    panes = _panes(bob_client.get(reverse("battles:battle", args=[battle.pk])).content.decode())
    assert BLANK_ANSWER_HTML in panes["A"] and BLANK_ANSWER_HTML not in panes["B"]
    for text in ("0", "-", "`x`", "![a](http://x.test/a.png)", "---"):
        assert answer_to_safe_html(text) != BLANK_ANSWER_HTML, text


def test_an_earlier_turns_blank_answer_says_so_in_the_history(acme: Tenant, bob: User, bob_client: Client) -> None:
    battle = ready_battle(acme, bob, answers=(" \n ", "Water runs."))
    Turn.objects.create(battle=battle, index=1, text="Shorter, please.")
    for side, competitor in (("left", acme.left), ("right", acme.right)):
        Generation.objects.create(
            battle=battle, side=side, turn=1, competitor=competitor, text="Short.", output_tokens=1, latency_s=0.1
        )
    page = bob_client.get(reverse("battles:battle", args=[battle.pk])).content.decode()
    history = page[: page.index('id="pane-A"')]
    assert history.count(BLANK_ANSWER_HTML) == 1 and "Water runs." in history
    assert BLANK_ANSWER_HTML not in page[page.index('id="pane-A"') :]
