"""Shadow battles (services): answers pushed ready-made join the campaign's buffer, are served and voted
on like generated battles, and are marked as such in the vote log."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

import pytest
from django.db import IntegrityError, transaction
from django.utils import timezone

from battles import selectors, services
from battles.models import Battle, Campaign, Competitor, Experiment, Generation, Prompt, Variant, Vote
from battles.services import IdempotencyConflict, ShadowAnswer, ShadowBattleInput
from core.errors import Conflict, Invalid
from raters.models import AuditAction, AuditEvent
from serving.analysis import answer_model_mentions, style_counts
from serving.models import Health
from tests.conftest import Tenant
from tests.factories import CompetitorFactory

pytestmark = [pytest.mark.django_db]

ANSWER_A = "# Plan\n\n- **first** step\n- second step\n\n```py\nprint(1)\n```\n"
ANSWER_B = "As ChatGPT I would say: just do it."


def item(key: str = "k1", *, prompt: str = "How do I plan a small garden?", **overrides) -> ShadowBattleInput:  # type: ignore[no-untyped-def]
    answers = overrides.pop(
        "answers",
        (
            ShadowAnswer(
                model="prod-model",
                version="2026-10",
                text=ANSWER_A,
                output_tokens=30,
                finish_reason="stop",
                latency_s=1.5,
                ttft_s=0.2,
            ),
            ShadowAnswer(
                model="candidate", version="rc1", text=ANSWER_B, output_tokens=9, finish_reason="length", latency_s=0.5
            ),
        ),
    )
    overrides.setdefault("category", "advice")
    return ShadowBattleInput(idempotency_key=key, prompt=prompt, answers=answers, **overrides)


def _import(tenant: Tenant, *items: ShadowBattleInput) -> list[services.ShadowResult]:
    return services.shadow_battles_import(campaign=tenant.campaign, items=list(items), actor=None)


def test_special_tokens_of_a_pushed_answer_never_reach_a_rater(acme):
    tokens = ShadowAnswer(
        model="gemma-ish",
        version="1",
        text="<start_of_image>" * 8 + "Water the garden.<end_of_turn>",
        output_tokens=12,
        finish_reason="stop",
        latency_s=1.0,
    )
    [result] = _import(acme, item(answers=(item().answers[0], tokens)))
    texts = set(Generation.objects.filter(battle_id=result.battle_id).values_list("text", flat=True))
    assert texts == {ANSWER_A, "Water the garden."}
    only_tokens = ShadowAnswer(
        model="m", version="1", text="<|im_start|><|im_end|>\n", output_tokens=2, finish_reason="stop", latency_s=1.0
    )
    with pytest.raises(Invalid, match="empty"):
        _import(acme, item("k2", answers=(item().answers[0], only_tokens)))


def test_a_shadow_battle_waits_in_the_buffer_ready_with_both_answers_analysed(acme):
    [result] = _import(acme, item())
    assert result.created and result.status == Battle.Status.READY
    battle = Battle.objects.get(pk=result.battle_id)
    assert battle.source == Battle.Source.SHADOW
    assert battle.rater_id is None and battle.status == Battle.Status.READY and battle.ready_at is not None
    assert battle.prompt.source == Prompt.Source.SHADOW and battle.prompt.category == "advice"
    assert battle.params == {"system_prompt": acme.campaign.system_prompt}
    by_text = {g.text: g for g in Generation.objects.filter(battle=battle)}
    a, b = by_text[ANSWER_A], by_text[ANSWER_B]
    assert a.style == style_counts(ANSWER_A).as_dict() and a.style["code_blocks"] == 1 and a.style["list_items"] == 2
    assert b.model_mentions == list(answer_model_mentions(ANSWER_B)) and b.model_mentions
    assert (a.output_tokens, a.finish_reason, a.latency_s, a.ttft_s, a.tokens_per_s) == (30, "stop", 1.5, 0.2, 20.0)
    assert b.ttft_s is None and b.finish_reason == "length"
    # Competitors matched or created by (model, version): two external models, no endpoint.
    assert {(c.external_model, c.version_label, c.endpoint_id) for c in (a.competitor, b.competitor)} == {
        ("prod-model", "2026-10", None),
        ("candidate", "rc1", None),
    }
    assert {battle.left_id, battle.right_id} == {a.competitor_id, b.competitor_id}
    assert AuditEvent.objects.filter(action=AuditAction.COMPETITOR_ADDED, data__via="shadow battle").count() == 2
    assert AuditEvent.objects.get(action=AuditAction.SHADOW_BATTLES_IMPORTED).data == {"count": 1, "replayed": 0}


def test_the_server_picks_the_sides_not_the_order_given(acme):
    results = _import(acme, *(item(f"k{i}", prompt=f"Question number {i}?") for i in range(200)))
    prod = Competitor.objects.get(campaign=acme.campaign, external_model="prod-model")
    lefts = Counter(Battle.objects.get(pk=r.battle_id).left_id == prod.pk for r in results)
    assert 60 <= lefts[True] <= 140  # a fair coin: P(outside) < 1e-8
    # Each side's generation is the answer of the competitor on that side.
    for battle in Battle.objects.filter(pk__in=[r.battle_id for r in results[:20]]):
        sides = {g.side: g.competitor_id for g in battle.generations.all()}
        assert sides == {"left": battle.left_id, "right": battle.right_id}


def test_an_answer_of_an_endpoint_model_counts_for_that_competitor(acme):
    name, version = acme.left.endpoint.name, acme.left.version_label  # type: ignore[union-attr]
    answers = (
        ShadowAnswer(model=name, version=version, text="yes", output_tokens=1, finish_reason="stop", latency_s=0.1),
        ShadowAnswer(model="other", version="1", text="no", output_tokens=1, finish_reason="stop", latency_s=0.1),
    )
    [result] = _import(acme, item(answers=answers))
    battle = Battle.objects.get(pk=result.battle_id)
    assert acme.left.pk in {battle.left_id, battle.right_id}
    assert Competitor.objects.filter(campaign=acme.campaign, external_model=name).count() == 0


def test_the_same_key_and_body_replays_the_first_result_and_writes_nothing(acme):
    [first] = _import(acme, item())
    counts = (Battle.objects.count(), Generation.objects.count(), Prompt.objects.count(), AuditEvent.objects.count())
    [again] = _import(acme, item())
    assert again.battle_id == first.battle_id and not again.created
    assert (Battle.objects.count(), Generation.objects.count(), Prompt.objects.count(), AuditEvent.objects.count()) == (
        counts
    )


def test_the_same_key_with_another_body_is_a_conflict_and_changes_nothing(acme):
    [first] = _import(acme, item())
    battles = Battle.objects.count()
    with pytest.raises(IdempotencyConflict) as exc:
        _import(acme, item("fresh", prompt="Another question?"), item(prompt="A different prompt?"))
    assert exc.value.field_errors == {"battles.1.idempotency_key": ["Already used with a different request body."]}
    assert Battle.objects.count() == battles  # the fresh item of the call was not written either
    assert Battle.objects.get(pk=first.battle_id).prompt.text == "How do I plan a small garden?"


def test_a_batch_is_all_or_nothing_and_names_every_bad_item_and_field(acme):
    bad_answers = (
        ShadowAnswer(model="m", version="1", text="  ", output_tokens=-1, finish_reason="stop", latency_s=1.0),
        ShadowAnswer(model="", version="1", text="ok", output_tokens=1, finish_reason="", latency_s=-2.0),
    )
    with pytest.raises(Invalid) as exc:
        _import(acme, item("ok"), item("bad", answers=bad_answers), item("bad2", category="poetry", prompt=" "))
    fields = exc.value.field_errors
    assert set(fields) == {
        "battles.1.answers.0.text",
        "battles.1.answers.0.output_tokens",
        "battles.1.answers.1.model",
        "battles.1.answers.1.finish_reason",
        "battles.1.answers.1.latency_s",
        "battles.2.category",
        "battles.2.prompt",
    }
    assert not Battle.objects.filter(campaign=acme.campaign).exists()
    assert not Competitor.objects.filter(campaign=acme.campaign, endpoint__isnull=True).exists()


def test_two_answers_of_one_model_and_a_repeated_key_are_refused(acme):
    same = ShadowAnswer(model="m", version="1", text="a", output_tokens=1, finish_reason="stop", latency_s=1.0)
    with pytest.raises(Invalid) as exc:
        _import(acme, item(answers=(same, same)))
    assert "battles.0.answers" in exc.value.field_errors
    with pytest.raises(Invalid) as exc:
        _import(acme, item("k"), item("k", prompt="Other?"))
    assert "battles.1.idempotency_key" in exc.value.field_errors


def test_a_closed_campaign_takes_no_shadow_battles_and_a_withdrawn_competitor_none(acme):
    _import(acme, item())
    withdrawn = Competitor.objects.get(external_model="candidate")
    services.competitor_save(competitor=_deactivate(withdrawn), actor=None, changed=["active"])
    with pytest.raises(Invalid) as exc:
        _import(acme, item("k2", prompt="Another?"))
    assert list(exc.value.field_errors) == ["battles.0.answers.1.model"]
    Campaign.objects.filter(pk=acme.campaign.pk).update(status=Campaign.Status.CLOSED)
    acme.campaign.refresh_from_db()
    with pytest.raises(Conflict):
        _import(acme, item("k3", prompt="Third?"))


def _deactivate(competitor: Competitor) -> Competitor:
    competitor.active = False
    return competitor


def test_a_rater_claims_a_shadow_battle_and_the_vote_says_shadow(acme, bob):
    [result] = _import(acme, item())
    assignment = services.battle_assign(campaign=acme.campaign, user=bob, session_key="s")
    assert assignment.battle.pk == result.battle_id and not assignment.resumed
    battle = services.battle_mark_shown(battle=assignment.battle)
    vote = services.vote_submit(battle_id=battle.pk, user=bob, choice="left")
    assert vote.source == Battle.Source.SHADOW
    event = vote.as_event()
    assert event["source"] == "shadow"
    assert {event["left"]["model"], event["right"]["model"]} == {"prod-model", "candidate"}
    assert event["left"]["model"] == battle.left.external_model
    assert event["identity"]["answer_names_model"] is True  # ANSWER_B names ChatGPT, found at write time
    assert event["params"] == {"system_prompt": acme.campaign.system_prompt}
    # A generated battle's vote says generated.
    assert Vote._meta.get_field("source").default == Battle.Source.GENERATED


def test_a_shadow_battle_has_one_turn(acme, bob):
    Campaign.objects.filter(pk=acme.campaign.pk).update(max_turns=3)
    _import(acme, item())
    acme.campaign.refresh_from_db()
    battle = services.battle_mark_shown(
        battle=services.battle_assign(campaign=acme.campaign, user=bob, session_key="s").battle
    )
    with pytest.raises(services.ContinueRefused):
        services.battle_continue(battle_id=battle.pk, user=bob, text="And then?")
    assert Battle.objects.get(pk=battle.pk).status == Battle.Status.READY


def test_maintenance_keeps_old_shadow_battles_and_a_claim_still_serves_them(acme, bob):
    [result] = _import(acme, item())
    long_ago = timezone.now() - timedelta(seconds=acme.campaign.buffer_max_age_s + 3600)
    Battle.objects.filter(pk=result.battle_id).update(created_at=long_ago)
    generated = Battle.objects.create(
        organization=acme.organization,
        campaign=acme.campaign,
        prompt=Prompt.objects.filter(campaign=acme.campaign, source=Prompt.Source.POOL)[0],
        left=acme.left,
        right=acme.right,
        status=Battle.Status.READY,
    )
    Battle.objects.filter(pk=generated.pk).update(created_at=long_ago)
    # The external competitors have no endpoint to be down; the endpoint ones are down.
    type(acme.left.endpoint).objects.filter(pk__in=[acme.left.endpoint_id, acme.right.endpoint_id]).update(  # type: ignore[union-attr]
        health=Health.DOWN
    )
    services.buffer_maintain(campaign_id=acme.campaign.pk)
    assert Battle.objects.get(pk=generated.pk).status == Battle.Status.VOID
    assert Battle.objects.get(pk=result.battle_id).status == Battle.Status.READY
    assignment = services.battle_assign(campaign=acme.campaign, user=bob, session_key="s")
    assert assignment.battle.pk == result.battle_id


def test_closing_the_campaign_keeps_unclaimed_shadow_battles_ready(acme, bob):
    claimed_result, waiting_result = _import(acme, item("a"), item("b", prompt="Second question here?"))
    services.battle_assign(campaign=acme.campaign, user=bob, session_key="s")
    services.campaign_close(campaign=acme.campaign, actor=None)
    statuses = {r.battle_id: Battle.objects.get(pk=r.battle_id).status for r in (claimed_result, waiting_result)}
    assert sorted(statuses.values()) == [Battle.Status.READY, Battle.Status.VOID]
    assert Battle.objects.get(status=Battle.Status.READY).rater_id is None


def test_external_competitors_are_available_but_never_drawn_for_generated_battles(acme):
    _import(acme, item())
    import random

    external = set(
        Competitor.objects.filter(campaign=acme.campaign, endpoint__isnull=True).values_list("pk", flat=True)
    )
    assert len(external) == 2
    available = set(selectors.competitors_available(campaign=acme.campaign).values_list("pk", flat=True))
    assert external <= available
    rng = random.Random(1)
    for _ in range(50):
        pair = selectors.pair_pick(campaign=acme.campaign, rng=rng)
        assert pair is not None and {pair[0].pk, pair[1].pk} == {acme.left.pk, acme.right.pk}
    services.buffer_fill(campaign_id=acme.campaign.pk)  # buffer_size 0: nothing; then a real fill
    Campaign.objects.filter(pk=acme.campaign.pk).update(buffer_size=10)
    for battle in services.buffer_fill(campaign_id=acme.campaign.pk):
        assert {battle.left_id, battle.right_id} == {acme.left.pk, acme.right.pk}
    # One endpoint competitor withdrawn: two external ones left cannot make a generated battle.
    Competitor.objects.filter(pk=acme.right.pk).update(active=False)
    assert selectors.pair_pick(campaign=acme.campaign, rng=rng) is None
    assert set(selectors.endpoints_watched()) == {acme.left.endpoint_id}


def test_a_competitor_is_an_endpoint_or_an_external_model_and_unique_per_campaign(acme):
    with pytest.raises(IntegrityError), transaction.atomic():
        CompetitorFactory.create(campaign=acme.campaign, external_model="x", version_label="1")
    with pytest.raises(IntegrityError), transaction.atomic():
        Competitor.objects.create(organization=acme.organization, campaign=acme.campaign, version_label="1")
    Competitor.objects.create(
        organization=acme.organization, campaign=acme.campaign, external_model="x", version_label="1"
    )
    with pytest.raises(IntegrityError), transaction.atomic():
        Competitor.objects.create(
            organization=acme.organization, campaign=acme.campaign, external_model="x", version_label="1"
        )
    with pytest.raises(Invalid):
        services.competitor_save(
            competitor=Competitor(campaign=acme.campaign, version_label="1"), actor=None, changed=[]
        )
    assert str(Competitor.objects.get(external_model="x")) == "x 1"


def test_an_experiment_maps_the_answers_variants_to_competitors(acme):
    experiment = Experiment.objects.create(organization=acme.organization, key="prompt-v2", campaign=acme.campaign)
    Variant.objects.create(experiment=experiment, name="control", competitor=acme.left)
    Variant.objects.create(experiment=experiment, name="treatment", competitor=acme.right)
    Variant.objects.create(experiment=experiment, name="bare")
    answers = (
        ShadowAnswer(variant="control", text="one", output_tokens=1, finish_reason="stop", latency_s=0.1),
        ShadowAnswer(variant="treatment", text="two", output_tokens=2, finish_reason="stop", latency_s=0.2),
    )
    [result] = _import(acme, item(answers=answers, experiment="prompt-v2"))
    battle = Battle.objects.get(pk=result.battle_id)
    assert battle.experiment_id == experiment.pk
    texts = {g.competitor_id: g.text for g in battle.generations.all()}
    assert texts == {acme.left.pk: "one", acme.right.pk: "two"}
    missing = (answers[0], ShadowAnswer(variant="bare", text="x", output_tokens=1, finish_reason="stop", latency_s=1))
    with pytest.raises(Invalid) as exc:
        _import(acme, item("k2", answers=missing, experiment="prompt-v2"), item("k3", experiment="nope"))
    assert set(exc.value.field_errors) == {"battles.0.answers.1.variant", "battles.1.experiment"}


def test_the_csv_export_has_the_source_column(acme, bob, alice_client):
    import csv
    import io

    from django.urls import reverse

    from battles.apis import CSV_COLUMNS

    _import(acme, item())
    battle = services.battle_mark_shown(
        battle=services.battle_assign(campaign=acme.campaign, user=bob, session_key="s").battle
    )
    services.vote_submit(battle_id=battle.pk, user=bob, choice="tie")
    response = alice_client.get(reverse("api:votes", args=[acme.campaign.pk, "csv"]))
    rows = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert "source" in CSV_COLUMNS and [row["source"] for row in rows] == ["shadow"]


@pytest.mark.django_db(transaction=True)
def test_concurrent_pushes_with_one_key_make_one_battle(vote_log_purge, acme, alice):
    """Four requests with the same key and body at once (a client's retries racing): the unique key lets
    one insert win; the others replay its battle."""
    import threading

    from django.db import connection

    from raters.tenancy import principal_scope

    if connection.vendor != "postgresql":
        pytest.fail("the race is settled by PostgreSQL's unique index: run on PostgreSQL (scripts/test)")
    barrier = threading.Barrier(4)
    results: list[services.ShadowResult] = []

    def push() -> None:
        try:
            barrier.wait()
            with principal_scope(alice):
                results.extend(_import(acme, item("race")))
        finally:
            connection.close()

    threads = [threading.Thread(target=push) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert len(results) == 4 and len({r.battle_id for r in results}) == 1
    assert sum(r.created for r in results) == 1
    assert Battle.objects.filter(campaign=acme.campaign, idempotency_key="race").count() == 1
    assert Competitor.objects.filter(campaign=acme.campaign, endpoint__isnull=True).count() == 2


def test_leaderboards_name_external_models_too(acme):
    from ranking.selectors import competitor_names

    _import(acme, item())
    names = {entry["model"] for entry in competitor_names(campaign=acme.campaign).values()}
    assert names == {acme.left.model_name, acme.right.model_name, "prod-model", "candidate"}
