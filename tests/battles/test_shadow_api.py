"""Shadow battles over the REST API: push (one, or a batch), idempotency, the status read, and the path of
a pushed battle through the rater's pages to the vote log, blind until the vote."""

from __future__ import annotations

import copy
import json
import re
from typing import Any

import pytest
from django.test import Client
from django.urls import resolve, reverse

from battles.models import Battle, Competitor, Generation, Prompt, Vote
from raters.services import api_key_revoke
from tests.conftest import Tenant, api_client

pytestmark = [pytest.mark.django_db]

SECRET_MODEL, OTHER_MODEL = "prod-gateway-secretname", "candidate-hushhush"


def body(key: str = "req-1", **overrides: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "idempotency_key": key,
        "prompt": "How often should I water tomatoes in summer?",
        "category": "advice",
        "language": "en",
        "answers": [
            {
                "model": SECRET_MODEL,
                "version": "2026-11-02",
                "text": "Water **deeply** once or twice a week.",
                "output_tokens": 11,
                "finish_reason": "stop",
                "latency_s": 7.654,
                "ttft_s": 0.321,
            },
            {
                "model": OTHER_MODEL,
                "version": "rc3",
                "text": "- In the morning\n- At the roots",
                "output_tokens": 9,
                "finish_reason": "stop",
                "latency_s": 3.219,
            },
        ],
    }
    data.update(overrides)
    return data


def post(client: Client, url: str, data: Any, **headers: Any) -> Any:
    return client.post(url, data=json.dumps(data), content_type="application/json", **headers)


def url(tenant: Tenant) -> str:
    return reverse("api:shadow-battles", args=[tenant.campaign.pk])


def batch_url(tenant: Tenant) -> str:
    return reverse("api:shadow-battles-batch", args=[tenant.campaign.pk])


def error(response: Any) -> dict[str, Any]:
    payload = response.json()
    assert set(payload) == {"error"} and set(payload["error"]) == {"code", "message", "fields"}, payload
    return payload["error"]  # type: ignore[no-any-return]


@pytest.fixture
def writer(acme: Tenant) -> Client:
    return api_client(acme.organization, scope="write")


def test_a_write_key_pushes_a_shadow_battle(acme, writer):
    response = post(writer, url(acme), body())
    assert response.status_code == 201, response.content
    data = response.json()
    assert set(data) == {"id", "status", "created"} and data["status"] == "ready" and data["created"] is True
    battle = Battle.objects.get(pk=data["id"])
    assert battle.source == Battle.Source.SHADOW and battle.campaign_id == acme.campaign.pk
    assert battle.rater_id is None and battle.generations.count() == 2
    assert set(
        Competitor.objects.filter(campaign=acme.campaign, endpoint__isnull=True).values_list(
            "external_model", flat=True
        )
    ) == {
        SECRET_MODEL,
        OTHER_MODEL,
    }


def test_an_owner_pushes_with_a_session_a_rater_cannot(acme, alice_client, bob_client):
    assert post(alice_client, url(acme), body()).status_code == 201
    refused = post(bob_client, url(acme), body("req-2"))
    assert refused.status_code == 404 and error(refused)["code"] == "not_found"


def test_an_outsider_gets_404_and_nothing_is_written(acme, globex, charlie_client):
    outsider = api_client(globex.organization, scope="write")
    for client in (outsider, charlie_client):
        response = post(client, url(acme), body())
        assert response.status_code == 404 and error(response)["code"] == "not_found"
    status_url = reverse("api:shadow-battle", args=[acme.campaign.pk, "5d0c1f7e-3f0b-4b9e-9a57-2f0c8f3b1a10"])
    assert outsider.get(status_url).status_code == 404
    assert not Battle.objects.filter(campaign=acme.campaign).exists()


def test_a_read_key_gets_403_and_a_revoked_key_401(acme, alice):
    reader = api_client(acme.organization, scope="read")
    response = post(reader, url(acme), body())
    assert response.status_code == 403 and error(response)["code"] == "permission_denied"
    writer = api_client(acme.organization, scope="write")
    api_key_revoke(api_key=writer.api_key, actor=alice)  # type: ignore[attr-defined]
    response = post(writer, batch_url(acme), {"battles": [body()]})
    assert response.status_code == 401 and error(response)["code"] == "authentication_failed"
    assert not Battle.objects.exists()


def test_malformed_json_is_a_400_parse_error(acme, writer):
    response = writer.post(url(acme), data='{"prompt": "x", ', content_type="application/json")
    assert response.status_code == 400 and error(response)["code"] == "parse_error"


def test_wrong_types_are_400_naming_the_field(acme, writer):
    bad = body()
    bad["answers"][0]["output_tokens"] = "many"
    bad["answers"][1]["latency_s"] = -1
    bad["category"] = "poetry"
    response = post(writer, url(acme), bad)
    assert response.status_code == 400
    fields = error(response)["fields"]
    assert set(fields) == {"answers.0.output_tokens", "answers.1.latency_s", "category"}
    one_answer = body(answers=body()["answers"][:1])
    assert set(error(post(writer, url(acme), one_answer))["fields"]) == {"answers"}
    empty = body()
    empty["answers"][0]["text"] = "   "
    assert set(error(post(writer, url(acme), empty))["fields"]) == {"answers.0.text"}
    assert post(writer, url(acme), ["not", "an", "object"]).status_code == 400
    assert not Battle.objects.exists()


def test_an_unknown_campaign_is_404(acme, writer):
    response = post(writer, reverse("api:shadow-battles", args=[999_999]), body())
    assert response.status_code == 404 and error(response)["code"] == "not_found"


def test_the_idempotency_key_from_the_header_replays_the_first_result(acme, writer):
    data = body()
    del data["idempotency_key"]
    first = post(writer, url(acme), data, HTTP_IDEMPOTENCY_KEY="hdr-1")
    assert first.status_code == 201
    counts = (Battle.objects.count(), Generation.objects.count(), Prompt.objects.count(), Competitor.objects.count())
    again = post(writer, url(acme), data, HTTP_IDEMPOTENCY_KEY="hdr-1")
    assert again.status_code == 200 and again.json() == {**first.json(), "created": False}
    same_in_body = post(writer, url(acme), {**data, "idempotency_key": "hdr-1"})
    assert same_in_body.status_code == 200 and same_in_body.json()["id"] == first.json()["id"]
    assert (Battle.objects.count(), Generation.objects.count(), Prompt.objects.count(), Competitor.objects.count()) == (
        counts
    )


def test_the_same_key_with_another_body_is_409_and_changes_nothing(acme, writer):
    first = post(writer, url(acme), body())
    changed = body()
    changed["answers"][0]["text"] = "Water every day."
    response = post(writer, url(acme), changed)
    assert response.status_code == 409
    assert error(response)["code"] == "conflict" and "idempotency_key" in error(response)["fields"]
    assert Battle.objects.count() == 1
    assert set(Generation.objects.values_list("text", flat=True)) == {
        "Water **deeply** once or twice a week.",
        "- In the morning\n- At the roots",
    }
    assert Battle.objects.get().pk == Battle.objects.get(pk=first.json()["id"]).pk


def test_a_key_is_required_and_body_and_header_must_agree(acme, writer):
    data = body()
    del data["idempotency_key"]
    assert set(error(post(writer, url(acme), data))["fields"]) == {"idempotency_key"}
    mismatch = post(writer, url(acme), body("a"), HTTP_IDEMPOTENCY_KEY="b")
    assert mismatch.status_code == 400 and set(error(mismatch)["fields"]) == {"idempotency_key"}


def test_a_batch_imports_all_and_replays_all(acme, writer):
    items = [body(f"b{i}", prompt=f"Batch question number {i}?") for i in range(25)]
    response = post(writer, batch_url(acme), {"battles": items})
    assert response.status_code == 201, response.content
    data = response.json()
    assert (data["created"], data["replayed"], len(data["battles"])) == (25, 0, 25)
    assert Battle.objects.filter(campaign=acme.campaign, source="shadow").count() == 25
    again = post(writer, batch_url(acme), {"battles": items})
    assert again.status_code == 200 and again.json()["created"] == 0
    assert [b["id"] for b in again.json()["battles"]] == [b["id"] for b in data["battles"]]


def test_a_batch_with_bad_items_names_each_and_writes_nothing(acme, writer):
    items = [body(f"b{i}", prompt=f"Question {i}?") for i in range(5)]
    items[1]["answers"][0]["text"] = ""
    items[3]["answers"][1]["finish_reason"] = "x" * 40
    del items[4]["idempotency_key"]
    response = post(writer, batch_url(acme), {"battles": items})
    assert response.status_code == 400
    assert set(error(response)["fields"]) == {"battles.1.answers.0.text", "battles.3.answers.1.finish_reason"}
    items = [body(f"b{i}", prompt=f"Question {i}?") for i in range(3)]
    del items[2]["idempotency_key"]
    items[0]["answers"][1]["model"] = items[0]["answers"][0]["model"]
    items[0]["answers"][1]["version"] = items[0]["answers"][0]["version"]
    response = post(writer, batch_url(acme), {"battles": items})
    assert set(error(response)["fields"]) == {"battles.2.idempotency_key"}
    del items[2]
    response = post(writer, batch_url(acme), {"battles": items})
    assert set(error(response)["fields"]) == {"battles.0.answers"}  # two answers of one model
    assert not Battle.objects.exists() and not Competitor.objects.filter(endpoint__isnull=True).exists()


def test_a_batch_is_at_most_1000_and_a_reused_key_conflicts(acme, writer):
    too_many = post(writer, batch_url(acme), {"battles": [body(f"k{i}") for i in range(1001)]})
    assert too_many.status_code == 400 and "battles" in error(too_many)["fields"]
    post(writer, url(acme), body("taken"))
    other = body("taken", prompt="Something else entirely?")
    response = post(writer, batch_url(acme), {"battles": [body("new"), other]})
    assert response.status_code == 409 and set(error(response)["fields"]) == {"battles.1.idempotency_key"}
    assert Battle.objects.count() == 1


def _vote_through_pages(client: Client, tenant: Tenant) -> tuple[Battle, str]:
    """A rater's ordinary path: next battle, its page (blind), the vote."""
    response = client.post(reverse("battles:next", args=[tenant.campaign.pk]))
    assert response.status_code == 302
    battle_id = resolve(response["Location"]).kwargs["battle_id"]
    page = client.get(response["Location"])
    assert page.status_code == 200
    return Battle.objects.get(pk=battle_id), page.content.decode()


def test_a_pushed_battle_is_rated_blind_through_the_pages_and_logged_as_shadow(acme, writer, bob_client):
    pushed = post(writer, url(acme), body()).json()
    battle, html = _vote_through_pages(bob_client, acme)
    assert str(battle.pk) == pushed["id"]
    # Blind: no model names, versions or timings before the vote; both panes rendered alike.
    for secret in (SECRET_MODEL, OTHER_MODEL, "2026-11-02", "rc3", "7.654", "7.65", "3.219", "3.22", "0.321"):
        assert secret not in html, f"{secret!r} leaked before the vote"
    assert "<strong>deeply</strong>" in html and "Answer A" in html and "Answer B" in html
    panes = re.findall(r'<article class="pane" id="pane-([AB])">\s*<h2 class="pane-label">Answer \1</h2>', html)
    assert panes == ["A", "B"]
    assert 'id="continue-form"' not in html  # one turn: no model could continue pushed answers

    status_url = reverse("api:shadow-battle", args=[acme.campaign.pk, battle.pk])
    assert writer.get(status_url).json()["status"] == "ready"
    voted = bob_client.post(reverse("battles:vote", args=[battle.pk]), {"choice": "right"})
    assert voted.status_code in (200, 302)
    vote = Vote.objects.get(battle=battle)
    assert vote.source == "shadow" and vote.as_event()["source"] == "shadow"
    revealed = bob_client.get(reverse("battles:battle", args=[battle.pk])).content.decode()
    assert SECRET_MODEL in revealed and OTHER_MODEL in revealed

    reader = api_client(acme.organization, scope="read")
    state = reader.get(status_url)
    assert state.status_code == 200
    data = state.json()
    assert data["status"] == "voted" and data["source"] == "shadow" and data["idempotency_key"] == "req-1"
    right = battle.right
    assert data["vote"]["choice"] == "right"
    assert data["vote"]["preferred"] == {"model": right.model_name, "version": right.version_label}
    assert {data["vote"]["left"]["model"], data["vote"]["right"]["model"]} == {SECRET_MODEL, OTHER_MODEL}
    export = writer.get(reverse("api:votes", args=[acme.campaign.pk, "jsonl"]))
    events = [json.loads(line) for line in b"".join(export.streaming_content).decode().splitlines()]
    assert [event["source"] for event in events] == ["shadow"]


def test_the_status_read_knows_only_shadow_battles_of_the_campaign(acme, globex, writer):
    generated = Battle.objects.create(
        organization=acme.organization,
        campaign=acme.campaign,
        prompt=Prompt.objects.filter(campaign=acme.campaign)[0],
        left=acme.left,
        right=acme.right,
    )
    for battle_id in (generated.pk, "00000000-0000-0000-0000-000000000000"):
        response = writer.get(reverse("api:shadow-battle", args=[acme.campaign.pk, battle_id]))
        assert response.status_code == 404 and error(response)["code"] == "not_found"
    pushed = post(writer, url(acme), body()).json()
    assert writer.get(reverse("api:shadow-battle", args=[globex.campaign.pk, pushed["id"]])).status_code == 404
    data = writer.get(reverse("api:shadow-battle", args=[acme.campaign.pk, pushed["id"]])).json()
    assert data["status"] == "ready" and data["vote"] is None and data["experiment"] is None


def test_answers_in_the_request_order_do_not_decide_the_sides(acme, writer):
    lefts = set()
    for i in range(24):
        pushed = post(writer, url(acme), body(f"o{i}", prompt=f"Order question {i}?")).json()
        lefts.add(Battle.objects.get(pk=pushed["id"]).left.model_name)
    assert lefts == {SECRET_MODEL, OTHER_MODEL}  # P(one side only) = 2 * 2**-24


def test_a_system_prompt_given_is_recorded(acme, writer):
    pushed = post(writer, url(acme), body(system_prompt="You are terse.")).json()
    assert Battle.objects.get(pk=pushed["id"]).params == {"system_prompt": "You are terse."}
    data = copy.deepcopy(body("other"))
    pushed = post(writer, url(acme), data).json()
    assert Battle.objects.get(pk=pushed["id"]).params == {"system_prompt": acme.campaign.system_prompt}


def test_only_json_is_accepted(acme, writer):
    response = writer.post(url(acme), {"prompt": "x"})  # a form post
    assert response.status_code == 415 and error(response)["code"] == "unsupported_media_type"


def test_surrogates_and_nul_characters_are_refused_naming_the_field(acme, writer):
    bad = json.dumps(body()).replace("once or twice", "once \\ud800 or twice").replace("At the roots", "At\\u0000")
    response = writer.post(url(acme), data=bad, content_type="application/json")
    assert response.status_code == 400
    assert set(error(response)["fields"]) == {"answers.0.text", "answers.1.text"}
    assert "U+D800" in error(response)["fields"]["answers.0.text"][0]


def test_external_competitors_are_listed_with_no_endpoint(acme, writer):
    post(writer, url(acme), body())
    listing = writer.get(reverse("api:competitors", args=[acme.campaign.pk]))
    assert listing.status_code == 200, listing.content
    rows = {row["model"]: row for row in listing.json()["results"]}
    assert rows[SECRET_MODEL]["endpoint"] is None and rows[SECRET_MODEL]["version"] == "2026-11-02"
    assert rows[acme.left.model_name]["endpoint"] == acme.left.endpoint_id
