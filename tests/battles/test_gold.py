"""Gold battles and attention checks: answer pairs with a known verdict, mixed into what raters are
served at the campaign's gold_rate, indistinguishable on the page, kept in the log (source gold) and out
of the rankings; per-rater gold accuracy; attention checks with warn and block thresholds."""

from __future__ import annotations

import json
import random
import re

import pytest
from django.contrib.auth.models import User
from django.urls import resolve, reverse

from battles import selectors, services
from battles.gold import Corruption, attention_answer_corrupt
from battles.models import Battle, Choice, Competitor, GoldItem, Vote
from battles.services import ShadowAnswer, ShadowBattleInput
from core.errors import Conflict, Invalid
from ranking.selectors import rater_quality, snapshot_latest
from ranking.services import leaderboards_recompute
from raters.models import AuditAction, AuditEvent, RaterFlag
from tests.conftest import Tenant, api_client, login

pytestmark = [pytest.mark.django_db]

GOOD = "Water the seedlings **every morning** and keep them in a sunny spot, out of the wind."
PLAIN = "Plant them somewhere and hope for rain."


def _shadow(tenant: Tenant, n: int, *, start: int = 0) -> None:
    """n live battles in the buffer (shadow battles: ready without a model server)."""
    items = [
        ShadowBattleInput(
            idempotency_key=f"live-{i}",
            prompt=f"Live question number {i}: how should I plan a garden?",
            category="advice",
            answers=(
                ShadowAnswer(
                    model="prod",
                    version="1",
                    text=f"Answer {i} " + GOOD,
                    output_tokens=20,
                    finish_reason="stop",
                    latency_s=1.0,
                ),
                ShadowAnswer(
                    model="cand",
                    version="2",
                    text=f"Answer {i} " + PLAIN,
                    output_tokens=9,
                    finish_reason="stop",
                    latency_s=0.5,
                ),
            ),
        )
        for i in range(start, start + n)
    ]
    services.shadow_battles_import(campaign=tenant.campaign, items=items, actor=None)


def _gold(tenant: Tenant, n: int, *, kind: str = GoldItem.Kind.GOLD, expected: str = "answer_1") -> list[GoldItem]:
    made = []
    for i in range(n):
        answer_1 = f"Item {i}: " + GOOD
        answer_2 = (
            attention_answer_corrupt(answer_1, method=Corruption.LOREM)
            if kind == GoldItem.Kind.ATTENTION
            else f"Item {i}: " + PLAIN
        )
        if expected == "answer_2":
            answer_1, answer_2 = answer_2, answer_1
        made.append(
            services.gold_item_save(
                item=GoldItem(
                    campaign=tenant.campaign,
                    prompt_text=f"Seedling question {i}: how do I look after them?",
                    category="advice",
                    answer_1=answer_1,
                    answer_2=answer_2,
                    expected=expected,
                    kind=kind,
                ),
                actor=None,
                changed=[],
            )
        )
    return made


def _configure(tenant: Tenant, **fields: object) -> None:
    campaign = tenant.campaign
    campaign.session_cap = 10_000
    campaign.rater_vote_cap = None
    for name, value in fields.items():
        setattr(campaign, name, value)
    campaign.save()
    services.campaign_open(campaign=campaign, actor=None)


def _next(tenant: Tenant, user: User) -> Battle:
    battle = services.battle_assign(campaign=tenant.campaign, user=user, session_key="s").battle
    return services.battle_mark_shown(battle=battle)


def _vote(battle: Battle, user: User, choice: str) -> Vote:
    return services.vote_submit(battle_id=battle.pk, user=user, choice=choice)


def _rater(tenant: Tenant, email: str) -> User:
    from raters.models import Role
    from tests.factories import MembershipFactory, UserFactory

    user = UserFactory.create(email=email)
    MembershipFactory.create(user=user, organization=tenant.organization, role=Role.RATER)
    tenant.pool.members.add(user)
    return user


# --- Items and the attention generator ---------------------------------------------------------------


def test_the_generator_breaks_an_answer_obviously_and_deterministically():
    text = "one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen"
    shuffled = attention_answer_corrupt(text, method="shuffle", seed=3)
    assert shuffled != text and sorted(shuffled.split()) == sorted(text.split())
    assert shuffled == attention_answer_corrupt(text, method="shuffle", seed=3)
    truncated = attention_answer_corrupt(text + " " + text, method="truncate")
    assert (text + " " + text).startswith(truncated) and len(truncated.split()) == 3
    assert attention_answer_corrupt(text, method="lorem").startswith("Lorem ipsum")
    assert attention_answer_corrupt("same same", method="shuffle").startswith("Lorem")  # nothing to shuffle


def test_items_are_validated_audited_and_fixed_once_served(acme, bob):
    with pytest.raises(Invalid):
        _gold(acme, 1, kind=GoldItem.Kind.ATTENTION, expected="both_bad")
    [item] = _gold(acme, 1)
    assert AuditEvent.objects.filter(action=AuditAction.GOLD_ITEM_CREATED, object_id=str(item.pk)).exists()
    _configure(acme, gold_rate=1.0)
    battle = _next(acme, bob)
    assert battle.gold_item_id == item.pk
    item.expected = "answer_2"
    with pytest.raises(Conflict):
        services.gold_item_save(item=item, actor=None, changed=["expected"])
    with pytest.raises(Conflict):
        services.gold_item_delete(item=item, actor=None)
    item.refresh_from_db()
    item.active = False
    services.gold_item_save(item=item, actor=None, changed=["active"])  # still allowed


# --- Mixing in ---------------------------------------------------------------------------------------


def test_gold_is_mixed_in_at_about_the_rate_and_never_repeats_an_item(acme, bob):
    _shadow(acme, 200)
    _gold(acme, 60)
    _configure(acme, gold_rate=0.1)
    kinds = []
    for _ in range(200):
        battle = _next(acme, bob)
        kinds.append(battle.source)
        _vote(battle, bob, Choice.LEFT)
    served = Battle.objects.filter(campaign=acme.campaign, rater=bob, source=Battle.Source.GOLD)
    n = served.count()
    assert kinds.count("gold") == n
    # Binomial(200, 0.1): mean 20, sd 4.2; the band is about 3 sd either side.
    assert 8 <= n <= 33, n
    items = list(served.values_list("gold_item_id", flat=True))
    assert len(items) == len(set(items))  # never the same item twice for one rater
    assert kinds.count("shadow") == 200 - n


def test_a_rater_who_has_seen_every_item_gets_live_battles(acme, bob):
    _shadow(acme, 5)
    _gold(acme, 2)
    _configure(acme, gold_rate=1.0)
    sources = []
    for _ in range(5):
        battle = _next(acme, bob)
        sources.append(battle.source)
        _vote(battle, bob, Choice.TIE)
    assert sources == ["gold", "gold", "shadow", "shadow", "shadow"]


def test_sides_are_randomised_and_the_verdict_follows_them(acme, alice, bob):
    _gold(acme, 40)
    _configure(acme, gold_rate=1.0)
    lefts = []
    for _ in range(40):
        battle = _next(acme, bob)
        left = battle.generations.get(side="left")
        lefts.append(left.competitor.version_label)
        # answer 1 is the better one: the expected choice is the side it is shown on
        assert battle.gold_item is not None
        assert battle.gold_expected == ("left" if left.text == battle.gold_item.answer_1 else "right")
        assert left.competitor_id == battle.left_id and battle.left.gold and battle.right.gold
        _vote(battle, bob, Choice.LEFT)
    assert 8 <= lefts.count("1") <= 32


def _structure(html: str) -> dict[str, object]:
    return {
        "panes": re.findall(r'<article class="pane"[^>]*>\s*<h2 class="pane-label">[^<]*</h2>', html),
        "buttons": re.findall(r'<button type="submit" name="choice" value="([a-z_]+)"', html),
        "forms": [re.sub(r"[0-9a-f-]{36}", "<id>", form) for form in re.findall(r"<form [^>]*>", html)],
        "inputs": sorted(re.findall(r'<input [^>]*name="([^"]+)"', html)),
        "classes": sorted(set(re.findall(r'class="([^"]+)"', html))),
    }


def test_a_gold_battle_looks_like_a_live_one_on_the_page(acme, bob):
    _shadow(acme, 1)
    _gold(acme, 1)
    _configure(acme, gold_rate=0.0)
    client = login(bob)
    live = client.post(reverse("battles:next", args=[acme.campaign.pk]))
    live_html = client.get(live["Location"]).content.decode()
    live_battle = Battle.objects.get(rater=bob, status="ready")
    _vote(live_battle, bob, Choice.LEFT)
    acme.campaign.gold_rate = 1.0
    acme.campaign.save()
    gold = client.post(reverse("battles:next", args=[acme.campaign.pk]))
    gold_html = client.get(gold["Location"]).content.decode()
    battle = Battle.objects.get(rater=bob, status="ready")
    assert battle.source == "gold"
    assert GOOD.split("**")[0].strip() in gold_html  # the answers are there
    for marker in ("gold", "Reference", "attention", "check", "answer_1", "expected"):
        assert marker.lower() not in gold_html.lower(), marker
    assert _structure(gold_html) == _structure(live_html)
    # After the vote: neutral labels only, unless the campaign turns feedback on.
    client.post(reverse("battles:vote", args=[battle.pk]), {"choice": battle.gold_expected})
    revealed = client.get(reverse("battles:battle", args=[battle.pk])).content.decode()
    assert "Reference answer" in revealed and "known answer" not in revealed
    acme.campaign.gold_feedback = True
    acme.campaign.save()
    revealed = client.get(reverse("battles:battle", args=[battle.pk])).content.decode()
    assert "your vote matched it" in revealed


# --- Out of the rankings, in the log -------------------------------------------------------------------


def test_gold_votes_stay_in_the_log_and_change_no_leaderboard(acme, alice, bob):
    _shadow(acme, 20)
    _gold(acme, 10)
    _configure(acme, gold_rate=0.0, ranking_min_votes=1, ranking_bootstrap_rounds=20)
    for _ in range(20):
        _vote(_next(acme, bob), bob, Choice.LEFT)
    leaderboards_recompute(campaign_id=acme.campaign.pk)
    before = snapshot_latest(campaign=acme.campaign)
    assert before is not None
    acme.campaign.gold_rate = 1.0
    acme.campaign.save()
    for _ in range(10):
        battle = _next(acme, bob)
        assert battle.source == "gold"
        _vote(battle, bob, Choice.RIGHT)
    leaderboards_recompute(campaign_id=acme.campaign.pk)
    after = snapshot_latest(campaign=acme.campaign)
    assert after is not None and after.version > before.version
    assert after.votes_total == before.votes_total == 20
    assert after.rows == before.rows
    gold_ids = set(Competitor.objects.filter(campaign=acme.campaign, gold=True).values_list("pk", flat=True))
    assert len(gold_ids) == 2
    # Never drawn for a generated battle either.
    assert not set(selectors.competitors_available(campaign=acme.campaign).values_list("pk", flat=True)) & gold_ids
    for i in range(20):
        pair = selectors.pair_pick(campaign=acme.campaign, rng=random.Random(i))
        assert pair is not None and not {pair[0].pk, pair[1].pk} & gold_ids
    assert after.rows and all("competitor_id" in row for row in after.rows)
    assert not {row["competitor_id"] for row in after.rows} & gold_ids
    # Kept in the log, marked gold, in the export.
    assert Vote.objects.filter(campaign=acme.campaign, source="gold").count() == 10
    export = api_client(acme.organization).get(reverse("api:votes", args=[acme.campaign.pk, "jsonl"]))
    events = [json.loads(line) for line in b"".join(export.streaming_content).decode().splitlines()]  # type: ignore[attr-defined]
    assert sorted({e["source"] for e in events}) == ["gold", "shadow"] and len(events) == 30
    # Not in the competitor lists.
    listed = api_client(acme.organization).get(reverse("api:competitors", args=[acme.campaign.pk])).json()
    assert "Reference answer" not in json.dumps(listed) and "prod" in json.dumps(listed)
    console = login(alice).get(reverse("admin:battles_campaign_change", args=[acme.campaign.pk])).content.decode()
    assert "Reference answer" not in console and "prod" in console
    # The name is reserved: a shadow battle cannot pass itself off as a gold pseudo-competitor.
    with pytest.raises(Invalid, match="reserved"):
        services.shadow_battles_import(
            campaign=acme.campaign,
            items=[
                ShadowBattleInput(
                    idempotency_key="impostor",
                    prompt="Another question?",
                    category="advice",
                    answers=(
                        ShadowAnswer(
                            model="Reference answer",
                            version="1",
                            text="x y",
                            output_tokens=2,
                            finish_reason="stop",
                            latency_s=1.0,
                        ),
                        ShadowAnswer(
                            model="prod", version="1", text="z w", output_tokens=2, finish_reason="stop", latency_s=1.0
                        ),
                    ),
                )
            ],
            actor=None,
        )


# --- Accuracy and attention thresholds -------------------------------------------------------------


def test_gold_accuracy_is_counted_per_rater_with_a_wilson_interval(acme, bob):
    carol = _rater(acme, "carol@acme.test")
    _shadow(acme, 4)
    _gold(acme, 10)
    _gold(acme, 0)
    _configure(acme, gold_rate=1.0)
    # bob: 7 of 10 right; carol: all 10 wrong
    for i in range(10):
        battle = _next(acme, bob)
        wrong = "right" if battle.gold_expected == "left" else "left"
        _vote(battle, bob, battle.gold_expected if i < 7 else wrong)
        battle = _next(acme, carol)
        _vote(battle, carol, "right" if battle.gold_expected == "left" else "left")
    for user in (bob, carol):  # one live vote each, so they have a row in the ranked log
        _vote(_next(acme, user), user, Choice.LEFT)
    counts = selectors.gold_counts(campaign=acme.campaign)
    assert (counts[bob.pk].gold_answered, counts[bob.pk].gold_correct) == (10, 7)
    assert (counts[carol.pk].gold_answered, counts[carol.pk].gold_correct) == (10, 0)
    rows = {row["rater_id"]: row for row in rater_quality(campaign=acme.campaign)["raters"]}
    bob_gold = rows[bob.pk]["gold_accuracy"]
    assert bob_gold["answered"] == 10 and bob_gold["correct"] == 7 and bob_gold["accuracy"] == pytest.approx(0.7)
    # Wilson 95% for 7/10: (0.3968, 0.8922)
    assert bob_gold["lower"] == pytest.approx(0.3968, abs=1e-3) and bob_gold["upper"] == pytest.approx(0.8922, abs=1e-3)
    assert rows[carol.pk]["gold_accuracy"]["accuracy"] == 0.0


def test_the_rater_quality_api_shows_gold_accuracy_to_the_tenant_only(acme, globex, bob, alice_client, charlie_client):
    _shadow(acme, 2)
    _gold(acme, 1, kind=GoldItem.Kind.ATTENTION)
    _configure(acme, gold_rate=1.0)
    battle = _next(acme, bob)
    _vote(battle, bob, Choice.TIE)  # a tie on an attention check is a failure
    _vote(_next(acme, bob), bob, Choice.LEFT)
    url = reverse("api-rater-quality", args=[acme.campaign.pk])
    data = api_client(acme.organization).get(url).json()
    [row] = [r for r in data["raters"] if r["rater_id"] == bob.pk]
    assert row["gold_accuracy"] == {
        "answered": 1,
        "correct": 0,
        "accuracy": 0.0,
        "lower": 0.0,
        "upper": pytest.approx(0.7935, abs=1e-3),
        "attention_answered": 1,
        "attention_failed": 1,
    }
    assert api_client(globex.organization).get(url).status_code == 404


def test_a_rater_with_gold_votes_only_has_a_row_in_the_api(acme, bob):
    _gold(acme, 2)
    _configure(acme, gold_rate=1.0)
    for _ in range(2):
        battle = _next(acme, bob)
        _vote(battle, bob, battle.gold_expected)
    data = api_client(acme.organization).get(reverse("api-rater-quality", args=[acme.campaign.pk])).json()
    [row] = data["raters"]
    assert row["rater_id"] == bob.pk and row["votes"] == 0 and row["agreement"] is None
    assert row["gold_accuracy"]["answered"] == 2 and row["gold_accuracy"]["accuracy"] == 1.0


def _session(tenant: Tenant, user: User, pick, rounds: int) -> list[str]:  # type: ignore[no-untyped-def]
    """Vote ``rounds`` battles with ``pick(battle)``; returns what happened: "ok", "warned", "blocked"."""
    client = login(user)
    events = []
    for _ in range(rounds):
        response = client.post(reverse("battles:next", args=[tenant.campaign.pk]))
        if response.status_code != 302:
            assert response.status_code == 403
            assert "attention checks" in response.content.decode()
            events.append("blocked")
            break
        page = client.get(response["Location"])
        battle = Battle.objects.get(pk=resolve(response["Location"]).kwargs["battle_id"])
        assert page.status_code == 200
        voted = client.post(reverse("battles:vote", args=[battle.pk]), {"choice": pick(battle)}, follow=True)
        events.append("warned" if "read both answers carefully" in voted.content.decode() else "ok")
    return events


def test_a_random_script_is_warned_then_blocked_and_a_careful_rater_is_not(acme, bob):
    careful = _rater(acme, "careful@acme.test")
    _shadow(acme, 120)
    _gold(acme, 30, kind=GoldItem.Kind.ATTENTION)
    _gold(acme, 30, kind=GoldItem.Kind.ATTENTION, expected="answer_2")
    _configure(acme, gold_rate=0.3, attention_warn_after=2, attention_block_after=4)
    rng = random.Random(7)

    def script(battle: Battle) -> str:
        return rng.choice(Choice.values)

    def reader(battle: Battle) -> str:
        # Reads the answers: on a check, the intact one (what the broken one is not); else anything.
        return battle.gold_expected or rng.choice(Choice.values)

    events = _session(acme, bob, script, 100)
    assert "warned" in events and events[-1] == "blocked"
    assert events.index("warned") < events.index("blocked")
    assert selectors.attention_failures(campaign=acme.campaign, user=bob) == 4
    flag = RaterFlag.objects.get(rater=bob)
    assert "attention checks" in flag.reason and AuditEvent.objects.filter(action=AuditAction.RATER_FLAGGED).exists()
    # Refused at claim by the service too, and the flag takes their votes out of the rankings.
    with pytest.raises(services.RaterBlocked):
        services.battle_assign(campaign=acme.campaign, user=bob, session_key="other")
    from ranking.selectors import exclusion_policy_for

    assert bob.pk in exclusion_policy_for(acme.campaign).flagged_raters
    # A manager who removes the flag lets the rater back in.
    from raters.services import rater_flag_clear

    rater_flag_clear(flag=flag, actor=None)
    assert services.battle_assign(campaign=acme.campaign, user=bob, session_key="other").battle is not None

    careful_events = _session(acme, careful, reader, 40)
    assert set(careful_events) == {"ok"} and len(careful_events) == 40
    assert Battle.objects.filter(rater=careful, source="gold").count() > 0
    assert not RaterFlag.objects.filter(rater=careful).exists()


# --- The console -------------------------------------------------------------------------------------


def test_managers_add_attention_checks_in_the_console_and_outsiders_get_404(acme, globex, alice_client, charlie_client):
    response = alice_client.post(
        reverse("admin:battles_golditem_add"),
        {
            "campaign": acme.campaign.pk,
            "prompt_text": "How do I keep basil alive?",
            "category": "advice",
            "language": "en",
            "kind": "attention",
            "expected": "answer_2",
            "answer_1": "",
            "answer_2": "Give it sun, water when the soil is dry, and pinch off the flowers as they appear.",
            "corrupt": "shuffle",
            "active": "on",
            "note": "",
        },
    )
    assert response.status_code == 302, response.content.decode()[:3000]
    item = GoldItem.objects.get(campaign=acme.campaign)
    assert item.answer_1 and item.answer_1 != item.answer_2
    assert sorted(item.answer_1.split()) == sorted(item.answer_2.split())
    assert AuditEvent.objects.filter(action=AuditAction.GOLD_ITEM_CREATED).exists()
    change = reverse("admin:battles_golditem_change", args=[item.pk])
    assert alice_client.get(change).status_code == 200
    assert charlie_client.get(change).status_code in (302, 404)  # the admin's "no such object"
    assert item.prompt_text not in charlie_client.get(change, follow=True).content.decode()
    assert item.prompt_text not in charlie_client.get(reverse("admin:battles_golditem_changelist")).content.decode()


def test_the_campaign_page_reports_gold_accuracy_per_rater(acme, bob, alice_client):
    import numpy as np

    from battles.gold import wilson_interval
    from ranking.estimators import wilson_interval as ranking_wilson

    for k, n in ((7, 10), (0, 1), (5, 5), (123, 400)):
        lower, upper = ranking_wilson(np.array([k]), np.array([n]))
        assert wilson_interval(k, n) == (pytest.approx(float(lower[0])), pytest.approx(float(upper[0])))
    assert wilson_interval(0, 0) is None

    _shadow(acme, 2)
    _gold(acme, 4, kind=GoldItem.Kind.ATTENTION)
    _configure(acme, gold_rate=1.0)
    for i in range(4):
        battle = _next(acme, bob)
        _vote(battle, bob, battle.gold_expected if i < 3 else Choice.TIE)
    page = alice_client.get(reverse("admin:battles_campaign_change", args=[acme.campaign.pk])).content.decode()
    assert "Gold accuracy per rater" in page
    row = re.search(r"<tr><td>bob@acme.test</td>(.*?)</tr>", page)
    assert row is not None
    assert "<td>3/4</td><td>75% (30%–95%)</td><td>1/4</td><td></td>" == row.group(1)


def test_gold_items_are_imported_from_csv_all_or_none(acme, globex, alice_client, charlie_client):
    from django.core.files.uploadedfile import SimpleUploadedFile

    url = reverse("admin:battles_campaign_import_gold", args=[acme.campaign.pk])
    good = (
        "prompt,answer_1,answer_2,expected,kind,corrupt\n"
        '"How do I boil an egg?","Put it in boiling water for eight minutes, then cool it.","Just microwave it.",'
        "answer_1,gold,\n"
        '"How do I store basil?",,"Keep the stems in a glass of water at room temperature, loosely covered.",'
        "answer_2,attention,lorem\n"
    )
    bad = good + '"Third?","same","same",answer_1,gold,\n"Fourth?","a","b",tie,gold,\n'
    page = alice_client.post(url, {"file": SimpleUploadedFile("gold.csv", bad.encode(), "text/csv")})
    assert page.status_code == 200
    html = page.content.decode()
    assert "row 4: answer_2" in html and "row 5: expected" in html and "nothing was imported" in html
    assert not GoldItem.objects.filter(campaign=acme.campaign).exists()
    done = alice_client.post(url, {"file": SimpleUploadedFile("gold.csv", good.encode(), "text/csv")})
    assert done.status_code == 302
    items = list(GoldItem.objects.filter(campaign=acme.campaign).order_by("id"))
    assert [(i.kind, i.expected) for i in items] == [("gold", "answer_1"), ("attention", "answer_2")]
    assert items[1].answer_1.startswith("Lorem ipsum")
    assert AuditEvent.objects.filter(action=AuditAction.GOLD_ITEM_CREATED).count() == 2
    outsider = charlie_client.post(url, {"file": SimpleUploadedFile("gold.csv", good.encode(), "text/csv")})
    assert outsider.status_code == 404
    assert GoldItem.objects.filter(campaign=acme.campaign).count() == 2
