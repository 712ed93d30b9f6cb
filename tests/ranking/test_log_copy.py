"""The vote log's narrow copy (issue 23.3): the database writes it as votes are appended, on every path (a
rater's vote on a shadow battle, bulk inserts, raw SQL, gold votes left out), so that it always equals the log
column by column; and the recompute's reading of it equals the reading of every vote under any exclusion
policy, also after the policy changes (a rater flagged, a decision-time floor, caps) and more votes arrive."""

from __future__ import annotations

import uuid
from dataclasses import fields
from typing import Any

import numpy as np
import pytest
from django.db import DatabaseError, connection, transaction

from battles import services as battle_services
from battles.models import Battle, Campaign, Prompt, Vote
from battles.services import ShadowAnswer, ShadowBattleInput
from ranking.policy import STYLE_FEATURES, ExclusionPolicy, VoteLog, vote_log_from_arrays
from ranking.selectors import exclusion_policy_for, vote_arrays, vote_log
from ranking.services import log_copy_backfill
from raters.models import RaterFlag
from tests.factories import CompetitorFactory, ModelEndpointFactory, UserFactory

from .synth import votes_write

pytestmark = pytest.mark.django_db


def _log(campaign_id: int) -> list[tuple[Any, ...]]:
    """The copy as the log says it should be: every non-gold vote's columns, read from ``battles_vote``."""
    style = ", ".join(
        f"COALESCE(({side}_style->>'{key}')::int, 0)" for side in ("left", "right") for key in STYLE_FEATURES
    )
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT id, campaign_id, prompt_hash, category, left_id, right_id, "
            "CASE choice WHEN 'left' THEN 0 WHEN 'right' THEN 1 WHEN 'tie' THEN 2 ELSE 3 END, decision_ms, "
            f"rater_id, prompt_asks_identity OR answer_names_model, {style} FROM battles_vote "
            "WHERE campaign_id = %s AND source <> 'gold' ORDER BY id",
            [campaign_id],
        )
        return cursor.fetchall()


def _copy(campaign_id: int) -> list[tuple[Any, ...]]:
    style = ", ".join(f"l.{side}_{key}" for side in ("left", "right") for key in STYLE_FEATURES)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT l.vote_id, l.campaign_id, p.prompt_hash, p.category, l.left_id, l.right_id, l.outcome, "
            f"l.decision_ms, l.rater_id, l.identity, {style} FROM ranking_logvote l "
            "JOIN ranking_logprompt p ON p.id = l.prompt_key WHERE l.campaign_id = %s ORDER BY l.vote_id",
            [campaign_id],
        )
        return cursor.fetchall()


def _equal(a: Any, b: Any) -> bool:
    if isinstance(a, np.ndarray):
        return a.shape == b.shape and bool(np.array_equal(a, b))
    if hasattr(a, "__dataclass_fields__"):
        return all(_equal(getattr(a, f.name), getattr(b, f.name)) for f in fields(a))
    return bool(a == b)


def _reads_equal(campaign: Campaign, policy: ExclusionPolicy) -> dict[str, int]:
    """The recompute's reading of the copy equals the per-vote reading with the policy in numpy, field by
    field: counts by prompt and without, per prompt, every rule's tally, the sample (at rate 1 and below)."""
    votes = vote_arrays(campaign_id=campaign.pk)
    for by_prompt, per_vote_max in ((True, 1_000_000), (False, 1_000_000), (True, 40)):
        copy = vote_log(campaign_id=campaign.pk, policy=policy, by_prompt=by_prompt, per_vote_max=per_vote_max)
        reference = vote_log_from_arrays(votes, policy, by_prompt=by_prompt, per_vote_max=per_vote_max)
        for field in fields(VoteLog):
            assert _equal(getattr(copy, field.name), getattr(reference, field.name)), (field.name, by_prompt, policy)
    return copy.excluded


_COLUMNS = (
    "organization_id, campaign_id, battle_id, created_at, rater_id, pool_id, prompt_id, prompt_hash, category, "
    "language, prompt_source, left_id, right_id, left_model, left_version, left_tokens, left_finish_reason, "
    "left_latency_s, right_model, right_version, right_tokens, right_finish_reason, right_latency_s, params, "
    "choice, decision_ms, prompt_asks_identity, answer_names_model, left_style, right_style, source"
)


def _sql_copies(votes: Any, **override: str) -> None:
    """New votes written by one raw ``INSERT ... SELECT`` as copies of ``votes`` (each on a new battle), with
    the columns of ``override`` (a value per column, as SQL literals' parameters) replaced."""
    pairs = []
    for vote in votes:
        battle = Battle.objects.get(pk=vote.battle_id)
        battle.id = uuid.uuid4()
        battle.save(force_insert=True)
        pairs.append((vote.pk, battle.pk))
    names = [c.strip() for c in _COLUMNS.split(",")]
    chosen = ", ".join("n.battle" if c == "battle_id" else "%s" if c in override else f"v.{c}" for c in names)
    values = ", ".join(["(%s::bigint, %s::uuid)"] * len(pairs))
    params: list[Any] = [override[c] for c in names if c in override]
    params += [x for pair in pairs for x in (pair[0], str(pair[1]))]
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO battles_vote ({_COLUMNS}) SELECT {chosen} FROM battles_vote v "
            f"JOIN (VALUES {values}) AS n(vote, battle) ON n.vote = v.id",
            params,
        )


def _shadow_vote(campaign: Campaign, rater: Any, key: str, choice: str) -> Vote:
    """A shadow battle pushed over the service, claimed, shown and voted on as a rater does (``vote_submit``)."""
    answers = (
        ShadowAnswer(
            model="prod",
            version="1",
            text="# Title\n\n- **a**\n- b\n",
            output_tokens=12,
            finish_reason="stop",
            latency_s=1.0,
        ),
        ShadowAnswer(
            model="cand", version="1", text="Plain words.", output_tokens=3, finish_reason="stop", latency_s=0.5
        ),
    )
    item = ShadowBattleInput(idempotency_key=key, prompt=f"Shadow prompt {key}?", answers=answers, category="advice")
    battle_services.shadow_battles_import(campaign=campaign, items=[item], actor=None)
    battle = battle_services.battle_assign(campaign=campaign, user=rater, session_key=key).battle
    battle = battle_services.battle_mark_shown(battle=battle)
    return battle_services.vote_submit(battle_id=battle.pk, user=rater, choice=choice)


def _world(acme: Any, bob: Any) -> tuple[Campaign, list[Any], dict[str, Any]]:
    campaign = acme.campaign
    competitors = [acme.left, acme.right]
    for k in range(2):
        endpoint = ModelEndpointFactory(organization=acme.organization, name=f"copy-{k}")
        competitors.append(CompetitorFactory.create(campaign=campaign, endpoint=endpoint, version_label="1"))
    raters = [bob] + [UserFactory.create() for _ in range(4)]
    common = {"campaign": campaign, "pool": acme.pool, "prompts": list(Prompt.objects.filter(campaign=campaign))}
    return campaign, raters, {**common, "competitors": competitors, "strengths": (2.0, 1.0, 0.8, 0.5)}


def test_the_copy_is_the_log_after_mixed_writes_and_reads_as_every_vote_under_changing_policies(acme, bob):
    campaign, raters, common = _world(acme, bob)
    # A rater's votes on shadow battles first (the session cap would stop bob after the bulk votes below).
    _shadow_vote(campaign, bob, "s1", "left")
    _shadow_vote(campaign, bob, "s2", "both_bad")
    votes_write(**common, raters=raters, n=150, seed=1, both_bad_rate=0.05, categories=("coding", "writing"))
    # A bulk import in raw SQL: ten votes in one statement (the trigger sees them in one transition table).
    _sql_copies(Vote.objects.filter(campaign=campaign, source="generated").order_by("id")[:10], choice="tie")
    votes_write(**common, raters=raters[1:3], n=8, seed=2, decision_ms=400)  # too fast under a 1 s floor
    assert Vote.objects.filter(campaign=campaign).count() == 170
    assert _copy(campaign.pk) == _log(campaign.pk) and len(_log(campaign.pk)) == 170
    Campaign.objects.filter(pk=campaign.pk).update(min_decision_ms=1000, prompt_hash_cap=None, rater_vote_cap=None)
    campaign.refresh_from_db()
    # The eight, and the two shadow votes (shown and voted in the same instant).
    assert _reads_equal(campaign, exclusion_policy_for(campaign))["too_fast"] == 10
    # The policy changes after the votes were copied: nothing in the copy is rewritten, and the reading
    # still equals every vote's.
    RaterFlag.objects.create(organization=acme.organization, rater=raters[2], reason="a script")
    Campaign.objects.filter(pk=campaign.pk).update(min_decision_ms=0, prompt_hash_cap=20, rater_vote_cap=35)
    campaign.refresh_from_db()
    policy = exclusion_policy_for(campaign)
    assert policy.flagged_raters == (raters[2].pk,)
    votes_write(**common, raters=raters, n=60, seed=5, identity_every=7)
    assert _copy(campaign.pk) == _log(campaign.pk)
    excluded = _reads_equal(campaign, policy)
    assert all(
        excluded[rule] > 0 for rule in ("identity_leak", "over_prompt_cap", "over_rater_cap", "flagged_rater")
    ), excluded
    assert _reads_equal(campaign, ExclusionPolicy(exclude_identity_leaks=False))["total"] == 0  # every rule off


def test_gold_votes_are_not_copied_and_odd_style_counts_never_refuse_a_vote(acme, bob):
    campaign, raters, common = _world(acme, bob)
    [vote] = votes_write(**common, raters=raters, n=1, seed=2)
    _sql_copies([vote], source="gold")
    _sql_copies([vote], left_style='{"tokens": "many", "headers": 2.6, "bold": null}', right_style='{"tokens": 1e12}')
    _sql_copies([vote], left_style="null", right_style="[1, 2]")
    copied = {row[0]: row for row in _copy(campaign.pk)}
    assert len(copied) == 3  # the gold vote is not there
    odd = sorted(copied)[1:]
    width = len(STYLE_FEATURES)
    first = copied[odd[0]][10:]
    assert first[:width] == (0, 3, 0, 0) and first[width] == 2_147_483_647  # not a number: 0; 2.6: 3; 1e12 clipped
    assert copied[odd[1]][10:] == (0,) * 2 * width


def test_a_load_that_bypasses_the_trigger_is_made_whole_by_the_backfill(acme, bob):
    campaign, raters, common = _world(acme, bob)
    votes_write(**common, raters=raters, n=40, seed=3)
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL session_replication_role = replica")
        votes_write(**common, raters=raters, n=25, seed=4)
    assert len(_copy(campaign.pk)) == 40 and len(_log(campaign.pk)) == 65
    assert log_copy_backfill(campaign_id=campaign.pk) == 25
    assert log_copy_backfill(campaign_id=campaign.pk) == 0  # idempotent
    assert _copy(campaign.pk) == _log(campaign.pk)
    _reads_equal(campaign, exclusion_policy_for(campaign))


def test_the_copy_is_held_append_only_as_the_log_is(acme, bob):
    campaign, raters, common = _world(acme, bob)
    votes_write(**common, raters=raters, n=3, seed=6)
    for statement in (
        "UPDATE ranking_logvote SET outcome = 2",
        "DELETE FROM ranking_logvote",
        "UPDATE ranking_logprompt SET category = 'x'",
        "DELETE FROM ranking_logprompt",
    ):
        with pytest.raises(DatabaseError, match="append-only"), transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(statement)
    assert _copy(campaign.pk) == _log(campaign.pk)


def test_an_empty_log_and_a_log_whose_every_vote_is_excluded_read_as_every_vote(acme, bob):
    campaign, raters, common = _world(acme, bob)
    _reads_equal(campaign, exclusion_policy_for(campaign))  # no vote yet
    votes_write(**common, raters=raters, n=12, seed=7, decision_ms=100)
    Campaign.objects.filter(pk=campaign.pk).update(min_decision_ms=1000)
    campaign.refresh_from_db()
    assert _reads_equal(campaign, exclusion_policy_for(campaign))["too_fast"] == 12
