"""The rater's pages as a new user meets them: progress against the session cap, the cap as an end
state (not a 429, no "Start rating"), a typed prompt kept while a battle is pending, the vote buttons in
key order, titles and headings, the label and live region, and the manager's home page."""

from __future__ import annotations

import re

import pytest
from django.test import Client
from django.urls import reverse

from battles.models import Battle, Campaign, Prompt
from tests.conftest import Tenant, login, start_battle
from tests.factories import CampaignFactory

pytestmark = pytest.mark.django_db


def _vote(client: Client, battle: Battle, choice: str = "tie") -> str:
    assert client.post(reverse("battles:vote", args=[battle.pk]), {"choice": choice}).status_code == 302
    return client.get(reverse("battles:battle", args=[battle.pk])).content.decode()


def _campaign_page(client: Client, campaign: Campaign) -> str:
    return client.get(reverse("battles:campaign", args=[campaign.pk])).content.decode()


def _title(html: str) -> str:
    match = re.search(r"<title>(.*?)</title>", html, re.S)
    assert match
    return " ".join(match.group(1).split())


def test_progress_counter_counts_the_battles_of_this_session(acme: Tenant, bob_client: Client) -> None:
    assert "0 of 20 battles in this session" in _campaign_page(bob_client, acme.campaign)
    first, page = start_battle(bob_client, acme.campaign)
    assert "Battle 1 of 20 in this session" in page.content.decode()
    assert "Battle 1 of 20 in this session" in _vote(bob_client, first)
    second, page = start_battle(bob_client, acme.campaign)
    assert "Battle 2 of 20 in this session" in page.content.decode()
    assert "2 of 20 battles in this session" in _campaign_page(bob_client, acme.campaign)
    # The first battle keeps its number when opened again.
    assert "Battle 1 of 20" in bob_client.get(reverse("battles:battle", args=[first.pk])).content.decode()


def test_after_the_session_cap_no_next_or_start_button_and_no_429(acme: Tenant, bob_client: Client) -> None:
    Campaign.objects.filter(pk=acme.campaign.pk).update(session_cap=2)
    first, _ = start_battle(bob_client, acme.campaign)
    assert 'id="next-form"' in _vote(bob_client, first)
    second, _ = start_battle(bob_client, acme.campaign)
    revealed = _vote(bob_client, second)
    assert 'id="next-form"' not in revealed and "Next battle" not in revealed
    assert 'id="cap-reached"' in revealed and "2 of 2 battles in this session" in revealed

    response = bob_client.get(reverse("battles:campaign", args=[acme.campaign.pk]))
    assert response.status_code == 200
    html = response.content.decode()
    assert "Start rating" not in html and 'id="start"' not in html
    assert "Take a break" in html

    refused = bob_client.post(reverse("battles:next", args=[acme.campaign.pk]))
    assert refused.status_code == 200 and "Take a break" in refused.content.decode()
    # A new session (logging in again) may go on.
    assert "Start rating" in _campaign_page(login(acme.pool.members.get()), acme.campaign)


def test_after_the_rater_vote_cap_no_start_button_in_any_session(acme: Tenant, bob_client: Client) -> None:
    Campaign.objects.filter(pk=acme.campaign.pk).update(rater_vote_cap=1)
    battle, _ = start_battle(bob_client, acme.campaign)
    assert "1 votes in this campaign" in _vote(bob_client, battle)
    html = _campaign_page(login(acme.pool.members.get()), acme.campaign)
    assert "Start rating" not in html and "the most one rater may cast" in html


def test_a_pending_battle_is_finished_first_even_at_the_cap(acme: Tenant, bob_client: Client) -> None:
    Campaign.objects.filter(pk=acme.campaign.pk).update(session_cap=1)
    start_battle(bob_client, acme.campaign)
    html = _campaign_page(bob_client, acme.campaign)
    assert "Continue your battle" in html and 'id="cap-reached"' not in html


def test_a_prompt_typed_while_a_battle_is_pending_is_kept_for_after_the_vote(acme: Tenant, bob_client: Client) -> None:
    Campaign.objects.filter(pk=acme.campaign.pk).update(allow_rater_prompts=True)
    pending, _ = start_battle(bob_client, acme.campaign)
    # The campaign page does not offer the box while a battle is pending...
    html = _campaign_page(bob_client, acme.campaign)
    assert "<textarea" not in html and "once you have voted" in html
    # ...and a prompt sent anyway (from a page opened earlier) is kept, not thrown away.
    typed = "What is a monad, in two sentences?"
    response = bob_client.post(reverse("battles:next", args=[acme.campaign.pk]), {"prompt": typed}, follow=True)
    html = response.content.decode()
    assert response.redirect_chain[-1][0] == reverse("battles:battle", args=[pending.pk])
    assert "Your prompt is kept" in html and "was not used" not in html
    assert not Prompt.objects.filter(source=Prompt.Source.RATER).exists()

    revealed = _vote(bob_client, pending)
    assert re.search(r'<textarea id="own-prompt"[^>]*>' + re.escape(typed) + "</textarea>", revealed)
    assert typed in _campaign_page(bob_client, acme.campaign)

    response = bob_client.post(reverse("battles:next", args=[acme.campaign.pk]), {"prompt": typed})
    battle = Battle.objects.get(pk=response["Location"].rstrip("/").rsplit("/", 1)[-1])
    assert battle.prompt.text == typed and battle.prompt.source == Prompt.Source.RATER
    bob_client.get(reverse("battles:battle", args=[battle.pk]))
    assert '<textarea id="own-prompt"' in (after := _vote(bob_client, battle))
    assert re.search(r'<textarea id="own-prompt"[^>]*></textarea>', after)  # used: no longer offered


def test_a_refused_typed_prompt_is_offered_again_to_edit(acme: Tenant, bob_client: Client) -> None:
    Campaign.objects.filter(pk=acme.campaign.pk).update(allow_rater_prompts=True, prompt_hash_cap=1)
    battle, _ = start_battle(bob_client, acme.campaign)
    _vote(bob_client, battle)
    used = battle.prompt.text
    response = bob_client.post(reverse("battles:next", args=[acme.campaign.pk]), {"prompt": used})
    assert response.status_code == 409
    assert used in _campaign_page(bob_client, acme.campaign)


def test_vote_buttons_are_in_key_order(acme: Tenant, bob_client: Client) -> None:
    _, page = start_battle(bob_client, acme.campaign)
    form = page.content.decode().split('id="vote-form"', 1)[1].split("</form>", 1)[0]
    buttons = re.findall(r'<button[^>]*value="(\w+)" data-key="(\d) (\w)">[^<]*<kbd>(\d)</kbd>', form)
    assert buttons == [("left", "1", "a", "1"), ("right", "2", "b", "2"), ("tie", "3", "t", "3"),
                       ("both_bad", "4", "x", "4")]


def test_battle_pages_have_their_own_title_one_h1_and_no_headings_from_answers(
    acme: Tenant, bob_client: Client
) -> None:
    first, _ = start_battle(bob_client, acme.campaign)
    first.generations.update(text="# A big heading\n\n## Another\n\nBody text.")
    html = bob_client.get(reverse("battles:battle", args=[first.pk])).content.decode()
    assert _title(html) == f"Battle 1 of 20 · {acme.campaign.name} · Arena"
    assert re.findall(r"<h([1-6])", html) == ["1", "2", "2", "2"]  # the page, Prompt, Answer A, Answer B
    assert html.count('<p class="md-h1">A big heading</p>') == 2
    revealed = _vote(bob_client, first)
    assert _title(revealed) == f"Result of battle 1 · {acme.campaign.name} · Arena"
    assert revealed.count("<h1") == 1
    second, page = start_battle(bob_client, acme.campaign)
    assert _title(page.content.decode()) == f"Battle 2 of 20 · {acme.campaign.name} · Arena"


def test_the_prompt_box_has_a_label(acme: Tenant, bob_client: Client) -> None:
    Campaign.objects.filter(pk=acme.campaign.pk).update(allow_rater_prompts=True)
    html = _campaign_page(bob_client, acme.campaign)
    assert '<label for="own-prompt">Your prompt</label>' in html and '<textarea id="own-prompt"' in html


def test_the_live_region_gets_the_result_only_after_the_vote(acme: Tenant, bob_client: Client) -> None:
    battle, page = start_battle(bob_client, acme.campaign)
    before = page.content.decode()
    region = re.search(r'<div id="announcer"[^>]*>', before)
    assert region and 'aria-live="polite"' in region.group(0) and "data-announce" not in region.group(0)
    revealed = _vote(bob_client, battle, "right")
    region = re.search(r'<div id="announcer"[^>]*>', revealed)
    assert region
    assert f"Your vote is stored: B is better. Answer A was {battle.left.endpoint.name}" in region.group(0)


def test_the_managers_home_lists_their_campaigns_and_leaderboards(acme: Tenant, alice_client: Client,
                                                                   charlie_client: Client) -> None:
    draft = CampaignFactory.create(organization=acme.organization, name="Acme draft", status=Campaign.Status.DRAFT)
    html = alice_client.get(reverse("battles:campaigns")).content.decode()
    assert "No open campaign lists you as a rater" not in html
    assert "Campaigns you manage" in html
    assert reverse("admin:battles_campaign_change", args=[acme.campaign.pk]) in html
    assert reverse("admin:battles_campaign_change", args=[draft.pk]) in html
    assert reverse("ranking:leaderboard", args=[acme.campaign.pk]) in html
    assert reverse("ranking:leaderboard", args=[draft.pk]) not in html  # a draft has no leaderboard yet
    # charlie manages another organisation: none of Acme's campaigns on his home page.
    other = charlie_client.get(reverse("battles:campaigns")).content.decode()
    assert acme.campaign.name not in other and "Acme draft" not in other


def test_a_rater_home_page_is_unchanged_for_someone_who_manages_nothing(acme: Tenant, bob_client: Client) -> None:
    html = bob_client.get(reverse("battles:campaigns")).content.decode()
    assert acme.campaign.name in html and "Campaigns you manage" not in html
