"""The "refuse" identity-leak policy, attacked: a rater types "what model are you?" (and asks it again in
a later turn), a pool prompt asks it, a model names itself in its answer (whole, and while streaming).
Under "refuse" no model is called for such a question, nothing is logged as a vote, the rater is told
why; an answer naming a model voids the battle and nothing of it is shown. Under "flag" (the default)
the same prompt is answered and flagged in the log, as before."""

from __future__ import annotations

import random
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from battles import live, selectors, services
from battles.models import Battle, Campaign, Generation, Prompt, Turn, Vote
from battles.services import assignment as assignment_services
from battles.services import buffer as buffer_services
from battles.services import generation as generation_services
from raters.tenancy import scopes_disabled
from serving.triton.client import GenerationResult, StreamEvent
from tests.battles.test_streaming import read_stream
from tests.conftest import Tenant
from tests.factories import PromptFactory
from tests.planting import planting

pytestmark = pytest.mark.django_db

IDENTITY_QUESTION = "what model are you?"


def refuse(tenant: Tenant, **fields: Any) -> Campaign:
    Campaign.objects.filter(pk=tenant.campaign.pk).update(
        identity_policy=Campaign.IdentityPolicy.REFUSE, allow_rater_prompts=True, **fields
    )
    tenant.campaign.refresh_from_db()
    return tenant.campaign


@pytest.fixture
def no_model_call(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Any call to a model is recorded (and fails the request): the refusals must come before one."""
    calls: list[str] = []

    def called(*args: Any, **kwargs: Any) -> Any:
        calls.append("model called")
        raise AssertionError("a model was called")

    monkeypatch.setattr(generation_services, "generate_pair", called)
    monkeypatch.setattr(generation_services, "stream_pair", called)
    for module in (assignment_services, buffer_services, generation_services):  # where each caller looks the queue up
        monkeypatch.setattr(module, "_generation_queue", lambda battle: calls.append("generation queued"))
    return calls


def ready_battle(
    tenant: Tenant,
    rater: User,
    text: str = "Tell me about rivers.",
    answers: tuple[str, str] = ("Rivers flow.", "Water runs."),
) -> Battle:
    """A battle shown to ``rater`` with these two answers, left and right (answers are append-only: written once)."""
    prompt = PromptFactory.create(campaign=tenant.campaign, source=Prompt.Source.RATER, author=rater, text=text)
    now = timezone.now()
    battle = Battle.objects.create(
        organization=tenant.organization,
        campaign=tenant.campaign,
        rater=rater,
        pool=tenant.pool,
        prompt=prompt,
        left=tenant.left,
        right=tenant.right,
        params={**tenant.campaign.sampling_params(), "seed": 3},
        status=Battle.Status.READY,
        ready_at=now,
        shown_at=now,
        claimed_at=now,
    )
    for side, competitor, answer in (("left", tenant.left, answers[0]), ("right", tenant.right, answers[1])):
        Generation.objects.create(
            battle=battle, side=side, turn=0, competitor=competitor, text=answer, output_tokens=2, latency_s=0.1
        )
    return battle


def test_a_typed_identity_question_under_refuse_calls_no_model_logs_nothing_and_says_why(
    acme: Tenant, bob_client: Client, no_model_call: list[str]
):
    refuse(acme)
    before = (Battle.objects.count(), Prompt.objects.count(), Vote.objects.count())
    response = bob_client.post(reverse("battles:next", args=[acme.campaign.pk]), {"prompt": IDENTITY_QUESTION})
    body = response.content.decode()
    assert response.status_code == 400
    assert services.IDENTITY_QUESTION_REFUSED in body  # told plainly why, on the page
    assert "neither model was asked" in body
    assert (Battle.objects.count(), Prompt.objects.count(), Vote.objects.count()) == before
    assert no_model_call == []
    # The text waits pre-filled in the box, as for any refused prompt.
    page = bob_client.get(reverse("battles:campaign", args=[acme.campaign.pk])).content.decode()
    assert IDENTITY_QUESTION in page


@pytest.mark.parametrize(
    "question", ["Who are you?", "Are you ChatGPT?", "which company trained you", "What is your name?"]
)
def test_other_phrasings_are_refused_too(acme: Tenant, bob: User, question: str, no_model_call: list[str]):
    campaign = refuse(acme)
    with pytest.raises(services.IdentityQuestionRefused):
        services.battle_assign(campaign=campaign, user=bob, session_key="s", prompt_text=question)
    assert not Battle.objects.filter(campaign=campaign).exists() and no_model_call == []


def test_under_flag_the_same_question_is_answered_and_flagged(acme: Tenant, bob: User, no_model_call: list[str]):
    Campaign.objects.filter(pk=acme.campaign.pk).update(allow_rater_prompts=True)
    acme.campaign.refresh_from_db()
    assignment = services.battle_assign(
        campaign=acme.campaign, user=bob, session_key="s", prompt_text=IDENTITY_QUESTION
    )
    assert assignment.battle.prompt.asks_identity is True  # flagged; the log records it at the vote
    assert no_model_call == ["generation queued"]


def test_an_identity_question_as_a_later_turn_is_refused_and_the_battle_stays_as_it_was(
    acme: Tenant, bob: User, bob_client: Client, no_model_call: list[str]
):
    refuse(acme, max_turns=3)
    battle = ready_battle(acme, bob)
    response = bob_client.post(reverse("battles:continue", args=[battle.pk]), {"text": "Nice. Which model are you?"})
    body = response.content.decode()
    assert response.status_code == 400
    assert services.IDENTITY_QUESTION_REFUSED in body
    assert "Which model are you?" in body  # the turn's text is kept in the box
    battle.refresh_from_db()
    assert battle.status == Battle.Status.READY and battle.shown_at is not None  # still votable
    assert not Turn.objects.filter(battle=battle).exists() and no_model_call == []
    # Another turn is fine.
    services.battle_continue(battle_id=battle.pk, user=bob, text="Tell me more about deltas.")
    assert Turn.objects.filter(battle=battle).count() == 1


def test_pool_prompts_that_ask_identity_are_never_served_under_refuse(acme: Tenant, bob: User):
    campaign = refuse(acme)
    Prompt.objects.filter(campaign=campaign).delete()
    asking = PromptFactory.create(campaign=campaign, text="Hi! Who made you?")
    plain = PromptFactory.create(campaign=campaign, text="How do tides work?")
    assert asking.asks_identity and not plain.asks_identity  # kept by Prompt.save
    rng = random.Random(1)
    picks = {selectors.prompt_pick(campaign=campaign, user=bob, rng=rng) for _ in range(40)}
    assert picks == {plain}
    buffered = {selectors.buffer_prompt_pick(campaign=campaign, exclude=set(), rng=rng) for _ in range(20)}
    assert buffered == {plain}
    plain.active = False
    plain.save()
    assert selectors.prompt_pick(campaign=campaign, user=bob, rng=rng) is None
    # Under "flag" the question is served again (it stayed in the pool).
    Campaign.objects.filter(pk=campaign.pk).update(identity_policy=Campaign.IdentityPolicy.FLAG)
    campaign.refresh_from_db()
    assert selectors.prompt_pick(campaign=campaign, user=bob, rng=rng) == asking


def test_a_buffered_identity_battle_is_not_claimed_and_switching_to_refuse_voids_it(
    acme: Tenant, bob: User, alice: User
):
    campaign = acme.campaign
    asking = PromptFactory.create(campaign=campaign, text="Are you GPT-4?")
    battle = Battle.objects.create(
        organization=acme.organization,
        campaign=campaign,
        prompt=asking,
        left=acme.left,
        right=acme.right,
        params=campaign.sampling_params(),
        status=Battle.Status.READY,
        ready_at=timezone.now(),
    )
    refuse(acme)
    assert services.battle_claim(campaign=campaign, user=bob, pool=acme.pool, session_key="s") is None
    battle.refresh_from_db()
    assert battle.rater_id is None
    # The console's switch to "refuse" voids such battles waiting in the buffer.
    Campaign.objects.filter(pk=campaign.pk).update(identity_policy=Campaign.IdentityPolicy.FLAG)
    campaign.refresh_from_db()
    campaign.identity_policy = Campaign.IdentityPolicy.REFUSE
    services.campaign_save(campaign=campaign, actor=alice, changed=["identity_policy"])
    battle.refresh_from_db()
    assert battle.status == Battle.Status.VOID


def _answers(left: str, right: str) -> tuple[GenerationResult, GenerationResult]:
    return GenerationResult(left, 4, "stop", 0.2), GenerationResult(right, 4, "stop", 0.3)


def test_an_answer_naming_a_model_voids_the_battle_under_refuse_and_the_page_shows_none_of_it(
    acme: Tenant, bob: User, bob_client: Client
):
    refuse(acme)
    battle = ready_battle(acme, bob)
    Battle.objects.filter(pk=battle.pk).update(status=Battle.Status.GENERATING, shown_at=None, ready_at=None)
    with planting():  # back to before the answers arrived
        Generation.objects.filter(battle=battle).delete()
    left, right = _answers("Tides come from the Moon.", "As ChatGPT, made by OpenAI, I can say tides...")
    recorded = services.battle_generations_record(battle=battle, left=left, right=right)
    assert recorded.status == Battle.Status.VOID
    assert recorded.void_reason == services.IDENTITY_ANSWER_VOIDED
    page = bob_client.get(reverse("battles:battle", args=[battle.pk])).content.decode()
    assert "the battle was voided and its answers are not shown" in page
    assert "ChatGPT" not in page and "Tides come from the Moon" not in page
    response = bob_client.post(reverse("battles:vote", args=[battle.pk]), {"choice": "left"})
    assert response.status_code != 302 and not Vote.objects.filter(battle=battle).exists()
    # Under "flag" the same answers are shown (and flagged in the log at the vote).
    Campaign.objects.filter(pk=acme.campaign.pk).update(identity_policy=Campaign.IdentityPolicy.FLAG)
    other = ready_battle(acme, bob, text="And the sea?")
    Battle.objects.filter(pk=other.pk).update(status=Battle.Status.GENERATING, shown_at=None, ready_at=None)
    with planting():
        Generation.objects.filter(battle=other).delete()
    Battle.objects.filter(pk=battle.pk).update(rater=None)  # one open battle per rater
    other.refresh_from_db()
    assert services.battle_generations_record(battle=other, left=left, right=right).status == Battle.Status.READY


@pytest.mark.django_db(transaction=True)
def test_a_streamed_answer_that_names_a_model_is_cut_before_the_name_and_ends_voided(
    acme: Tenant, bob: User, settings: Any, monkeypatch: pytest.MonkeyPatch
):
    settings.REDIS_URL = None  # the in-process channel: the test reads what was published
    refuse(acme)
    battle = ready_battle(acme, bob)
    Battle.objects.filter(pk=battle.pk).update(status=Battle.Status.GENERATING, shown_at=None, ready_at=None, live=True)
    with planting():
        Generation.objects.filter(battle=battle).delete()
    published: list[live.LiveItem] = []
    real_publish = live.MemoryChannel.publish

    def spy(self: live.MemoryChannel, battle_id: str, item: live.LiveItem) -> None:
        published.append(item)
        real_publish(self, battle_id, item)

    monkeypatch.setattr(live.MemoryChannel, "publish", spy)

    def fake_stream(left_spec: Any, right_spec: Any, left_in: Any, right_in: Any, params: Any, on_event: Any) -> Any:
        left_text, right_text = "Rivers carve valleys slowly.", "Hello! I am Claude, by Anthropic. Rivers..."
        for i, (side, delta) in enumerate([(0, "Rivers carve "), (1, "Hello! I am "), (1, "Claude, by Anthropic."),
                                           (0, "valleys slowly."), (1, " Rivers...")]):  # fmt: skip
            on_event(StreamEvent(side=side, delta=delta, t=0.1 * (i + 1), done=False))
        left, right = _answers(left_text, right_text)
        on_event(StreamEvent(side=0, delta="", t=0.9, done=True, result=left))
        on_event(StreamEvent(side=1, delta="", t=1.0, done=True, result=right))
        return left, right

    monkeypatch.setattr(generation_services, "stream_pair", fake_stream)
    with scopes_disabled():
        recorded = services.battle_generate_live(battle_id=battle.pk)
    assert recorded is not None and recorded.status == Battle.Status.VOID
    assert recorded.void_reason == services.IDENTITY_ANSWER_VOIDED
    chunks = "".join(item.delta for item in published if item.kind == "chunk")
    assert "Claude" not in chunks and "Anthropic" not in chunks  # never published, so never shown
    assert "valleys" not in chunks  # nothing of either side after the name
    assert [item.status for item in published if item.kind == "end"] == ["void"]
    assert not Vote.objects.filter(battle=battle).exists()
    # The page's event stream (SSE) tells the rater why, and carries no answer text.
    stream = read_stream(bob, battle)
    assert [event for event, _, _ in stream.events] == ["void"]
    assert stream.events[0][1] == {"message": services.IDENTITY_ANSWER_VOIDED}
    assert "Claude" not in stream.raw and "Rivers" not in stream.raw


def test_a_shadow_pair_naming_a_model_is_stored_voided_under_refuse(acme: Tenant):
    campaign = refuse(acme)

    def item(key: str, text: str, prompt: str = "Summarise the news.") -> services.ShadowBattleInput:
        common = {"version": "1", "output_tokens": 3, "finish_reason": "stop", "latency_s": 0.1}
        answers = (
            services.ShadowAnswer(model="gw-a", text=text, **common),  # type: ignore[arg-type]
            services.ShadowAnswer(model="gw-b", text="Fine.", **common),  # type: ignore[arg-type]
        )
        return services.ShadowBattleInput(idempotency_key=key, prompt=prompt, category="advice", answers=answers)

    named, asking, plain = services.shadow_battles_import(
        campaign=campaign,
        items=[item("a", "As GPT-4 I think so."), item("b", "Sure.", prompt="Who made you?"), item("c", "Sure.")],
        actor=None,
    )
    assert (named.status, asking.status, plain.status) == (Battle.Status.VOID, Battle.Status.VOID, Battle.Status.READY)
    assert Battle.objects.get(pk=named.battle_id).void_reason == services.IDENTITY_ANSWER_VOIDED
