"""core.prepared: a statement compiled once and run with each call's values answers exactly as the ORM does,
never across organisations, and refuses a builder that depends on more than its slots."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

import pytest
from django.db import IntegrityError, connection, transaction
from django.db.models import Count, Max, Q, Value
from django.db.models.expressions import DatabaseDefault
from django.test.utils import CaptureQueriesContext, override_settings
from django.utils import timezone

from battles.models import Battle, Prompt, Vote
from battles.selectors import assignment, campaigns
from battles.services import buffer, vote
from core.prepared import MAX_MANY, Many, Prepared, PreparedAggregate, PreparedError, PreparedUpdate, first_unlocked
from raters.tenancy import ScopeError, organization_scope, scope, scopes_disabled
from tests.factories import (
    CampaignFactory,
    CompetitorFactory,
    MembershipFactory,
    PromptFactory,
    RaterPoolFactory,
    UserFactory,
)

pytestmark = pytest.mark.django_db


def _fields(instance: Any) -> dict[str, Any]:
    return {name: value for name, value in vars(instance).items() if name != "_state"}


def _prompts_of_campaign() -> Prepared[Prompt]:
    return Prepared(
        lambda campaign_id, since: (
            Prompt.objects.filter(campaign_id=campaign_id, created_at__gte=since)
            .select_related("campaign__organization", "author")
            .order_by("-created_at", "-id")
        ),
        campaign_id=int,
        since=datetime,
    )


def _orm_prompts(campaign_id: int, since: datetime) -> list[Prompt]:
    return list(
        Prompt.objects.filter(campaign_id=campaign_id, created_at__gte=since)
        .select_related("campaign__organization", "author")
        .order_by("-created_at", "-id")
    )


def test_a_read_sends_the_orms_sql_and_gives_the_orms_instances_related_rows_included() -> None:
    campaign = CampaignFactory.create()
    made = [PromptFactory.create(campaign=campaign) for _ in range(3)]
    PromptFactory.create()  # another campaign's
    statement = _prompts_of_campaign()
    since = timezone.now() - timedelta(hours=1)
    with organization_scope(campaign.organization_id):
        with CaptureQueriesContext(connection) as orm_sent:
            expected = _orm_prompts(campaign.pk, since)
        first = statement.all(campaign_id=campaign.pk, since=since)  # compiles
        assert statement.compiled_in_scope()
        with CaptureQueriesContext(connection) as prepared_sent:
            got = statement.all(campaign_id=campaign.pk, since=since)
    assert [q["sql"] for q in prepared_sent.captured_queries] == [q["sql"] for q in orm_sent.captured_queries]
    assert len(expected) == 3 and {p.pk for p in expected} == {p.pk for p in made}
    for rows in (first, got):
        assert [_fields(p) for p in rows] == [_fields(p) for p in expected]
        for prompt, reference in zip(rows, expected, strict=True):
            assert not prompt._state.adding and prompt._state.db == "default"
            # The related rows came with the read: no statement to reach them, and the same values.
            with CaptureQueriesContext(connection) as related:
                assert _fields(prompt.campaign) == _fields(reference.campaign)
                assert _fields(prompt.campaign.organization) == _fields(reference.campaign.organization)
                assert prompt.author is None
            assert related.captured_queries == []


def test_each_call_runs_with_its_own_values() -> None:
    one, two = CampaignFactory.create(), CampaignFactory.create()
    a = PromptFactory.create(campaign=one)
    b = PromptFactory.create(campaign=two)
    statement = _prompts_of_campaign()
    long_ago = timezone.now() - timedelta(days=1)
    with scopes_disabled():
        assert [p.pk for p in statement.all(campaign_id=one.pk, since=long_ago)] == [a.pk]
        assert [p.pk for p in statement.all(campaign_id=two.pk, since=long_ago)] == [b.pk]
        assert statement.all(campaign_id=two.pk, since=timezone.now() + timedelta(seconds=5)) == []
        assert statement.compiled_in_scope()


def test_values_and_values_list_rows_match_the_orm() -> None:
    campaign = CampaignFactory.create()
    for category in ("coding", "math", "coding"):
        PromptFactory.create(campaign=campaign, category=category)
    flat: Prepared[str] = Prepared(
        lambda campaign_id: (
            Prompt.objects.filter(campaign_id=campaign_id).order_by("id").values_list("category", flat=True)
        ),
        campaign_id=int,
    )
    pairs: Prepared[tuple[int, str]] = Prepared(
        lambda campaign_id: Prompt.objects.filter(campaign_id=campaign_id).order_by("id").values_list("pk", "text"),
        campaign_id=int,
    )
    dicts: Prepared[dict[str, Any]] = Prepared(
        lambda campaign_id: Prompt.objects.filter(campaign_id=campaign_id).order_by("id").values("pk", "created_at"),
        campaign_id=int,
    )
    base = Prompt.objects.filter(campaign_id=campaign.pk).order_by("id")
    for _ in range(2):  # compiled on the first call, run compiled on the second
        assert flat.all(campaign_id=campaign.pk) == ["coding", "math", "coding"]
        assert pairs.all(campaign_id=campaign.pk) == list(base.values_list("pk", "text"))
        assert dicts.all(campaign_id=campaign.pk) == list(base.values("pk", "created_at"))
    assert flat.compiled_in_scope() and pairs.compiled_in_scope() and dicts.compiled_in_scope()


def test_a_many_slot_is_compiled_for_each_count_of_values_and_answers_as_the_orms_in() -> None:
    campaign = CampaignFactory.create()
    prompts = [PromptFactory.create(campaign=campaign, category=c) for c in ("coding", "math", "writing", "math")]
    of_categories: Prepared[int] = Prepared(
        lambda campaign_id, categories: (
            Prompt.objects.filter(campaign_id=campaign_id, category__in=categories)
            .order_by("id")
            .values_list("pk", flat=True)
        ),
        campaign_id=int,
        categories=Many(str),
    )
    for categories in (("math",), ("coding", "writing"), ("math",), ("coding", "math", "writing"), ("nothing",)):
        expected = list(
            Prompt.objects.filter(campaign_id=campaign.pk, category__in=categories)
            .order_by("id")
            .values_list("pk", flat=True)
        )
        assert of_categories.all(campaign_id=campaign.pk, categories=categories) == expected
    assert of_categories.all(campaign_id=campaign.pk, categories=("writing", "coding")) == [
        prompts[0].pk,
        prompts[2].pk,
    ]
    assert of_categories.all(campaign_id=campaign.pk, categories=()) == []  # Django knows: nothing is sent
    assert len([key for key in of_categories._compiled if key[1] != (0,)]) == 3  # one, two and three values
    # Past MAX_MANY values the builder's own queryset answers (nothing compiled for that count).
    many = ("math", *(f"c{i}" for i in range(MAX_MANY)))
    assert len(of_categories.all(campaign_id=campaign.pk, categories=many)) == 2
    assert all(key[1][0] < MAX_MANY for key in of_categories._compiled)
    with pytest.raises(TypeError):
        of_categories.all(campaign_id=campaign.pk, categories=("math", "math"))
    with pytest.raises(TypeError):
        of_categories.all(campaign_id=campaign.pk, categories=["math"])


def test_deferred_fields_load_when_read_as_with_only() -> None:
    prompt = PromptFactory.create(text="A prompt whose text is deferred.")
    statement: Prepared[Prompt] = Prepared(
        lambda prompt_id: Prompt.objects.filter(pk=prompt_id).only("id", "category"), prompt_id=int
    )
    statement.all(prompt_id=prompt.pk)
    got = statement.first(prompt_id=prompt.pk)
    assert got is not None and got.get_deferred_fields() >= {"text", "language"}
    with CaptureQueriesContext(connection) as loaded:
        assert got.text == "A prompt whose text is deferred."
    assert len(loaded.captured_queries) == 1


@pytest.mark.tenant_scoped
def test_a_statement_compiled_in_one_organisations_scope_never_reads_anothers() -> None:
    with scopes_disabled():
        ours, theirs = CampaignFactory.create(), CampaignFactory.create()
        mine = PromptFactory.create(campaign=ours)
        foreign = PromptFactory.create(campaign=theirs)
    by_id: Prepared[Prompt] = Prepared(lambda prompt_id: Prompt.objects.filter(pk=prompt_id), prompt_id=int)
    with organization_scope(ours.organization_id):
        assert [p.pk for p in by_id.all(prompt_id=mine.pk)] == [mine.pk]
        assert by_id.all(prompt_id=foreign.pk) == []  # the same compiled statement: theirs is not in our scope
    with organization_scope(theirs.organization_id):
        assert by_id.all(prompt_id=mine.pk) == []
        assert [p.pk for p in by_id.all(prompt_id=foreign.pk)] == [foreign.pk]
    with organization_scope([ours.organization_id, theirs.organization_id]):
        assert len(by_id.all(prompt_id=foreign.pk)) == 1
    with scope(organization=[]):  # a principal of no organisation: Django knows it is empty, nothing is compiled
        assert by_id.all(prompt_id=mine.pk) == [] and not by_id.compiled_in_scope()
    # Outside any scope the statement refuses exactly as the manager does.
    with pytest.raises(ScopeError):
        by_id.all(prompt_id=mine.pk)
    with pytest.raises(ScopeError):
        by_id.all(prompt_id=mine.pk)


def test_a_builder_reading_the_clock_is_refused_rather_than_kept() -> None:
    campaign = CampaignFactory.create()
    recent: Prepared[Prompt] = Prepared(
        lambda campaign_id: Prompt.objects.filter(
            campaign_id=campaign_id, created_at__gte=timezone.now() - timedelta(hours=1)
        ),
        campaign_id=int,
    )
    with pytest.raises(PreparedError, match="depends on more than the slots"):
        recent.all(campaign_id=campaign.pk)


def test_a_slot_that_does_not_reach_the_sql_as_itself_is_refused() -> None:
    contains: Prepared[Prompt] = Prepared(lambda word: Prompt.objects.filter(text__contains=word), word=str)
    with pytest.raises(PreparedError, match="did not reach the SQL"):
        contains.all(word="idea")
    unused: Prepared[Prompt] = Prepared(lambda campaign_id: Prompt.objects.all(), campaign_id=int)
    with pytest.raises(PreparedError, match="did not reach the SQL"):
        unused.all(campaign_id=1)


def test_values_of_the_wrong_type_are_refused_before_any_sql() -> None:
    statement = _prompts_of_campaign()
    now = timezone.now()
    with CaptureQueriesContext(connection) as sent:
        for bad in (
            {"campaign_id": True, "since": now},  # a bool is an int to Python, not to the SQL
            {"campaign_id": "1", "since": now},
            {"campaign_id": 1, "since": now.replace(tzinfo=None)},
            {"campaign_id": 1},
            {"campaign_id": 1, "since": now, "other": 2},
        ):
            with pytest.raises(TypeError):
                statement.all(**bad)
    assert sent.captured_queries == []
    with pytest.raises(PreparedError):
        Prepared(lambda flag: Prompt.objects.filter(active=flag), flag=bool)


@pytest.mark.django_db(transaction=True)
def test_compiled_in_one_thread_it_runs_in_another_on_that_threads_connection() -> None:
    campaign = CampaignFactory.create()
    prompt = PromptFactory.create(campaign=campaign)
    by_id: Prepared[Prompt] = Prepared(lambda prompt_id: Prompt.objects.filter(pk=prompt_id), prompt_id=int)
    assert [p.pk for p in by_id.all(prompt_id=prompt.pk)] == [prompt.pk]
    seen: list[Any] = []

    def other() -> None:
        try:
            with scopes_disabled():
                seen.extend(p.pk for p in by_id.all(prompt_id=prompt.pk))
        except Exception as error:  # noqa: BLE001 - handed to the test's thread
            seen.append(error)
        finally:
            connection.close()

    thread = threading.Thread(target=other)
    thread.start()
    thread.join()
    assert seen == [prompt.pk]


def test_an_update_changes_what_the_orm_would_and_says_how_many() -> None:
    campaign = CampaignFactory.create()
    prompts = [PromptFactory.create(campaign=campaign, category="coding") for _ in range(3)]
    other = PromptFactory.create(category="coding")
    recategorise = PreparedUpdate(
        lambda campaign_id, category, author_id: (
            Prompt.objects.filter(campaign_id=campaign_id, category="coding"),
            {"category": category, "author_id": author_id},
        ),
        campaign_id=int,
        category=str,
        author_id=int,
    )
    user = UserFactory.create()
    with CaptureQueriesContext(connection) as sent:
        assert recategorise.run(campaign_id=campaign.pk, category="math", author_id=user.pk) == 3
    assert len(sent.captured_queries) == 1 and sent.captured_queries[0]["sql"].startswith("UPDATE")
    assert recategorise.run(campaign_id=campaign.pk, category="math", author_id=user.pk) == 0  # none left
    assert recategorise.compiled_in_scope()
    assert set(Prompt.objects.filter(pk__in=[p.pk for p in prompts]).values_list("category", "author_id")) == {
        ("math", user.pk)
    }
    other.refresh_from_db()
    assert other.category == "coding" and other.author_id is None


def test_a_locking_read_is_refused() -> None:
    locking: Prepared[Prompt] = Prepared(
        lambda prompt_id: Prompt.objects.filter(pk=prompt_id).select_for_update(), prompt_id=int
    )
    with pytest.raises(PreparedError, match="select_for_update"):
        locking.all(prompt_id=1)


def test_an_update_through_a_join_is_refused() -> None:
    through_join = PreparedUpdate(
        lambda name: (Prompt.objects.filter(campaign__name=name), {"category": "math"}), name=str
    )
    with pytest.raises(PreparedError, match="joins another table"):
        through_join.run(name="x")


def _counts_of_campaign() -> PreparedAggregate:
    return PreparedAggregate(
        lambda campaign_id, since: (
            Prompt.objects.filter(campaign_id=campaign_id),
            {
                "n": Count("*"),
                "recent": Count("pk", filter=Q(created_at__gte=since)),
                "coding": Count("pk", filter=Q(category="coding")),
                "latest": Max("created_at"),
            },
        ),
        campaign_id=int,
        since=datetime,
    )


def test_aggregates_answer_what_the_orms_aggregate_does_in_the_same_statement() -> None:
    campaign = CampaignFactory.create()
    for category in ("coding", "math", "coding"):
        PromptFactory.create(campaign=campaign, category=category)
    PromptFactory.create(category="coding")  # another campaign's
    counts = _counts_of_campaign()
    long_ago, later = timezone.now() - timedelta(days=1), timezone.now() + timedelta(days=1)
    for since in (long_ago, later, long_ago):
        with CaptureQueriesContext(connection) as orm_sent:
            expected = Prompt.objects.filter(campaign_id=campaign.pk).aggregate(
                n=Count("*"),
                recent=Count("pk", filter=Q(created_at__gte=since)),
                coding=Count("pk", filter=Q(category="coding")),
                latest=Max("created_at"),
            )
        with CaptureQueriesContext(connection) as sent:
            got = counts.run(campaign_id=campaign.pk, since=since)
        assert got == expected
        assert [q["sql"] for q in sent.captured_queries] == [q["sql"] for q in orm_sent.captured_queries]
    assert counts.compiled_in_scope()
    assert counts.run(campaign_id=campaign.pk, since=long_ago) == {
        "n": 3,
        "recent": 3,
        "coding": 2,
        "latest": max(Prompt.objects.filter(campaign_id=campaign.pk).values_list("created_at", flat=True)),
    }
    # No rows: the counts are 0 and the latest is None, as the ORM says.
    assert counts.run(campaign_id=campaign.pk + 10_000, since=long_ago) == {
        "n": 0,
        "recent": 0,
        "coding": 0,
        "latest": None,
    }


@pytest.mark.tenant_scoped
def test_an_aggregate_compiled_in_one_scope_counts_only_that_scopes_rows_in_another() -> None:
    with scopes_disabled():
        ours, theirs = CampaignFactory.create(), CampaignFactory.create()
        for campaign, n in ((ours, 2), (theirs, 3)):
            for _ in range(n):
                PromptFactory.create(campaign=campaign)
    counts = _counts_of_campaign()
    since = timezone.now() - timedelta(days=1)
    with organization_scope(ours.organization_id):
        assert counts.run(campaign_id=ours.pk, since=since)["n"] == 2
        assert counts.run(campaign_id=theirs.pk, since=since)["n"] == 0
    with organization_scope(theirs.organization_id):
        assert counts.run(campaign_id=theirs.pk, since=since)["n"] == 3
        assert counts.run(campaign_id=ours.pk, since=since)["n"] == 0
    with pytest.raises(ScopeError):
        counts.run(campaign_id=ours.pk, since=since)


def test_an_aggregate_django_computes_through_a_subquery_is_refused() -> None:
    sliced = PreparedAggregate(
        lambda campaign_id: (Prompt.objects.filter(campaign_id=campaign_id).order_by("id")[:5], {"n": Count("*")}),
        campaign_id=int,
    )
    with pytest.raises(PreparedError, match="subquery"):
        sliced.run(campaign_id=1)


@pytest.mark.parametrize("compiled", [True, False])
def test_first_updated_returns_the_one_row_it_wrote_as_the_orm_reads_it(compiled: bool) -> None:
    """``first_updated`` (UPDATE ... RETURNING, compiled; or the builder's read, update and read back) gives the
    row as written, its JSON decoded, the same as a read of it; a claim of the oldest of what is left each
    time; None when nothing is left; and it refuses an update of several rows."""
    campaign = CampaignFactory.create()
    left, right = CompetitorFactory.create(campaign=campaign), CompetitorFactory.create(campaign=campaign)
    battles = [
        Battle.objects.create(
            organization=campaign.organization, campaign=campaign, prompt=PromptFactory.create(campaign=campaign),
            left=left, right=right, status=Battle.Status.READY, params={"seed": i},
            created_at=timezone.now() - timedelta(minutes=10 - i),
        )
        for i in range(2)
    ]  # fmt: skip
    mark = PreparedUpdate(
        lambda campaign_id, note: (
            Battle.objects.filter(
                pk=first_unlocked(Battle.objects.filter(campaign_id=campaign_id, void_reason="").order_by("created_at"))
            ),
            {"void_reason": note},
        ),
        campaign_id=int,
        note=str,
    )
    with override_settings(ARENA_PREPARED=compiled), organization_scope(campaign.organization_id):
        got = [mark.first_updated(campaign_id=campaign.pk, note=f"taken {i}") for i in range(3)]
        assert mark.compiled_in_scope() == compiled
        taken: list[Battle] = [g for g in got if g is not None]
        assert [g.pk for g in taken] == [b.pk for b in battles] and got[2] is None
        for i, battle in enumerate(taken):
            assert battle.void_reason == f"taken {i}" and battle.params == {"seed": i}
            assert _fields(battle) == _fields(Battle.objects.get(pk=battle.pk))
        every = PreparedUpdate(
            lambda campaign_id: (Battle.objects.filter(campaign_id=campaign_id), {"void_reason": "all"}),
            campaign_id=int,
        )
        with pytest.raises(PreparedError, match="at most one row"):
            every.first_updated(campaign_id=campaign.pk)


@pytest.mark.parametrize("compiled", [True, False])
def test_update_and_insert_inserts_the_row_only_with_the_update_in_one_statement(compiled: bool) -> None:
    """``update_and_insert`` (one ``WITH ... UPDATE ... INSERT`` statement compiled; or the builder's update, then
    the insert, in a transaction) stores the new row only where the update changed one: the row as the ORM reads
    it back (its JSON, a column left to the database's default, its key set on the instance); nothing where the
    update matched nothing; an insert refused by a constraint undoes the update; several rows are refused."""
    campaign = CampaignFactory.create()
    left, right = CompetitorFactory.create(campaign=campaign), CompetitorFactory.create(campaign=campaign)
    rater = UserFactory.create()
    pool = RaterPoolFactory.create(organization=campaign.organization)
    prompt = PromptFactory.create(campaign=campaign)
    battle = Battle.objects.create(
        organization=campaign.organization, campaign=campaign, prompt=prompt, left=left, right=right, rater=rater,
        pool=pool, status=Battle.Status.READY, params={"seed": 1},
    )  # fmt: skip
    flip = PreparedUpdate(
        lambda battle_id: (Battle.objects.filter(pk=battle_id, status=Battle.Status.READY), {"status": "voted"}),
        battle_id=UUID,
    )

    def vote_of(choice: str, on: Battle = battle) -> Vote:
        made = Vote(
            organization=campaign.organization, campaign=campaign, battle=on, created_at=timezone.now(),
            rater=rater, pool=pool, prompt=prompt, prompt_hash=prompt.text_hash, category="", language="en",
            prompt_source="pool", left=left, right=right, left_model="l", left_version="1", left_tokens=3,
            left_finish_reason="stop", left_latency_s=0.5, right_model="r", right_version="1", right_tokens=4,
            right_finish_reason="length", right_latency_s=0.25, params={"seed": 1, "top_p": 0.9}, choice=choice,
            decision_ms=1200, left_style={"bold": 2}, right_style={}, prompt_asks_identity=False,
            answer_names_model=False, turns=[{"index": 0}],
        )  # fmt: skip
        made.source = DatabaseDefault(Value("generated"), output_field=Vote._meta.get_field("source"))
        return made

    with override_settings(ARENA_PREPARED=compiled), organization_scope(campaign.organization_id):
        stored = vote_of("left")
        with CaptureQueriesContext(connection) as captured:
            assert flip.update_and_insert(stored, battle_id=battle.pk) is True
        assert flip.compiled_in_scope() == compiled
        assert len([q for q in captured.captured_queries if q["sql"].startswith(("WITH", "UPDATE", "INSERT"))]) == (
            1 if compiled else 2
        )
        assert stored.pk is not None and not stored._state.adding and stored.source == "generated"
        assert _fields(stored) == _fields(Vote.objects.get(pk=stored.pk))
        assert Battle.objects.get(pk=battle.pk).status == "voted"

        again = vote_of("right")
        assert flip.update_and_insert(again, battle_id=battle.pk) is False  # the update matched nothing
        assert again.pk is None and again._state.adding
        assert list(Vote.objects.filter(battle=battle).values_list("choice", flat=True)) == ["left"]

        Battle.objects.filter(pk=battle.pk).update(status=Battle.Status.READY)
        with pytest.raises(IntegrityError), transaction.atomic():  # the log's one vote a battle
            flip.update_and_insert(vote_of("tie"), battle_id=battle.pk)
        assert Battle.objects.get(pk=battle.pk).status == Battle.Status.READY  # the update went with the insert

        every = PreparedUpdate(
            lambda campaign_id: (Battle.objects.filter(campaign_id=campaign_id), {"void_reason": "all"}),
            campaign_id=int,
        )
        other = Battle.objects.create(
            organization=campaign.organization, campaign=campaign, prompt=PromptFactory.create(campaign=campaign),
            left=left, right=right, status=Battle.Status.READY,
        )  # fmt: skip
        with pytest.raises(PreparedError, match="at most one row"), transaction.atomic():
            every.update_and_insert(vote_of("tie", on=other), campaign_id=campaign.pk)
        assert not Battle.objects.filter(void_reason="all").exists()  # rolled back with the transaction
        with pytest.raises(PreparedError, match="new instance"):
            flip.update_and_insert(stored, battle_id=battle.pk)


@override_settings(ARENA_PREPARED=False)
def test_switched_off_every_call_runs_the_builders_own_queryset() -> None:
    prompt = PromptFactory.create()
    by_id: Prepared[Prompt] = Prepared(lambda prompt_id: Prompt.objects.filter(pk=prompt_id), prompt_id=int)
    assert [p.pk for p in by_id.all(prompt_id=prompt.pk)] == [prompt.pk]
    assert not by_id.compiled_in_scope()


def test_the_rater_cycles_statements_run_compiled_in_a_tenant_scope() -> None:
    """The statements the claim, the battle page and the vote run compile (none falls back to the ORM on
    every call), checked through the selectors and services that use them."""
    campaign = CampaignFactory.create()
    organization = campaign.organization
    rater = UserFactory.create()
    MembershipFactory.create(user=rater, organization=organization)
    pool = RaterPoolFactory.create(organization=organization)
    pool.members.add(rater)
    campaign.rater_pools.add(pool)
    left, right = CompetitorFactory.create(campaign=campaign), CompetitorFactory.create(campaign=campaign)
    prompt = PromptFactory.create(campaign=campaign)
    battle = Battle.objects.create(
        organization=organization, campaign=campaign, prompt=prompt, left=left, right=right, rater=rater,
        pool=pool, status=Battle.Status.READY, params={"temperature": 0.7, "seed": 11}, claimed_at=timezone.now(),
    )  # fmt: skip
    reference = Battle.objects.select_related("campaign", "prompt", "left__endpoint", "right__endpoint").get(
        pk=battle.pk
    )
    now = datetime.now(UTC)
    with organization_scope(organization.pk):
        for _ in range(2):
            read = assignment.battle_for_rater(user=rater, battle_id=battle.pk)
            assert read is not None and _fields(read) == _fields(reference)  # the JSON params decoded alike
            assert read.params == {"temperature": 0.7, "seed": 11}
            assert _fields(read.left.endpoint) == _fields(reference.left.endpoint)
            assert assignment.battle_for_rater(user=rater, battle_id=str(battle.pk)) is not None
            assert assignment.battle_for_rater(user=rater, battle_id="not-a-uuid") is None
            assert assignment.battle_pending_for_rater(campaign=campaign, user=rater) == battle
            assert assignment.battle_turns(battle) == [] and assignment.battle_generations(battle) == []
            assert campaigns.campaign_for_rater(user=rater, campaign_id=campaign.pk) == campaign
            assert campaigns.pool_for_rater(campaign=campaign, user=rater) == pool
            assert vote._mark_shown.run(battle_id=UUID(int=0), shown_at=now) == 0
            assert (
                vote._mark_voted.run(
                    battle_id=UUID(int=0), voted_at=now, campaign_id=campaign.pk, rater_id=rater.pk, shown_at=now
                )
                == 0
            )
            for capped in (False, True):  # nothing ready in the buffer: nothing claimed
                claim = buffer._claims[(False, capped)]
                extra = {"hash_cap": 3} if capped else {}
                assert claim.first_updated(
                    campaign_id=campaign.pk, rater_id=rater.pk, since=now, pool_id=pool.pk, session_key="k",
                    claimed_at=now, **extra,
                ) is None  # fmt: skip
            assert assignment._answers_logged.all(battle_id=battle.pk) == []
            assert assignment.hashes_rated_by(campaign=campaign, user=rater, hashes={prompt.text_hash, "x"}) == {
                prompt.text_hash
            }
            assert assignment.battles_in_session_window(campaign=campaign, user=rater) == 1
            assert assignment.pool_and_standing(campaign=campaign, user=rater) == (pool, assignment.RaterStanding(1, 1))
            for_next = assignment.campaign_for_next(user=rater, campaign_id=campaign.pk, now=now)
            assert for_next is not None and for_next.pk == campaign.pk
            assert _fields(for_next.organization) == _fields(organization)
            standing = assignment.RaterStanding(1, 1)
            assert assignment.pool_and_standing(campaign=for_next, user=rater, now=now) == (pool, standing)
            assert assignment.votes_by_rater(campaign=campaign, user=rater) == 0
            assert assignment.battle_page_counts(battle=battle, user=rater)[0] == 1
            page = assignment.battle_page_for_rater(user=rater, battle_id=battle.pk)
            assert page is not None and _fields(page.left) == _fields(reference.left)
            assert (page.page_position, page.page_in_session) == (1, 1)  # type: ignore[attr-defined]
            assert assignment.battle_generations(page) == []  # no answers stored: none read with it
            logged = assignment.battle_with_answers_logged(user=rater, battle_id=battle.pk)
            assert logged is not None and _fields(logged.prompt) == _fields(reference.prompt)
            assert assignment.battle_answers_logged(logged) == []
        statements: list[Prepared[Any] | PreparedUpdate | PreparedAggregate] = [
            assignment._in_session_window, assignment._page_counts, assignment._votes_of_rater,
            assignment._hashes_rated,
            assignment._battle_of_rater, assignment._battle_pending, assignment._turns_of_battle,
            assignment._generations_of_battle, campaigns._campaign_for_rater,
            campaigns._pools_of_rater, buffer._claims[(False, False)], buffer._claims[(False, True)],
            vote._mark_shown, vote._mark_voted, assignment._answers_logged, assignment._pool_and_standing,
            assignment._battle_page_of_rater, assignment._battle_logged_of_rater, assignment._campaign_for_next,
        ]  # fmt: skip
        assert [s.name for s in statements if not s.compiled_in_scope()] == []
