"""Importing prompts from a file: the parser (pure), the service (all or nothing), the console's page and
the API's endpoint."""

from __future__ import annotations

import csv
import io
import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse
from django.utils.datastructures import MultiValueDict
from hypothesis import given
from hypothesis import strategies as st

from battles import services
from battles.admin import PromptImportForm
from battles.models import Campaign, Prompt
from battles.prompt_import import CATEGORIES, PromptRow, format_for, language_normalise, parse_csv, parse_jsonl
from battles.prompting import PROMPT_MAX_CHARS, prompt_hash
from core.errors import Conflict, Invalid
from raters.models import AuditAction, AuditEvent, Role
from tests.conftest import api_client, login
from tests.factories import MembershipFactory, UserFactory

MAX_ROWS = 1000


def jsonl(*rows: object) -> bytes:
    return "".join(json.dumps(row) + "\n" for row in rows).encode()


# --- The parser (no database) --------------------------------------------------------------------


def test_jsonl_rows_are_read_with_defaults_left_to_the_classifier():
    parsed = parse_jsonl(
        jsonl(
            {"text": "  Sum 2 and 3  ", "category": "math", "language": "EN", "external_id": 17},
            {"text": "Write a haiku"},
        ),
        max_rows=MAX_ROWS,
    )
    assert parsed.ok
    assert parsed.rows == [
        PromptRow(row=1, text="Sum 2 and 3", category="math", language="en", external_id="17"),
        PromptRow(row=2, text="Write a haiku"),
    ]


def test_a_malformed_jsonl_line_is_reported_by_its_line_number():
    data = jsonl({"text": "one"}) + b"\n" + b'{"text": "two",\n' + jsonl(["not", "an", "object"])
    parsed = parse_jsonl(data, max_rows=MAX_ROWS)
    assert not parsed.ok
    assert parsed.errors["row 3"][0].startswith("Not valid JSON:")
    assert parsed.errors["row 4"] == ['Each line must be one JSON object, such as {"text": "..."}.']
    assert parsed.invalid_rows == 2
    assert parsed.summary() == "2 rows are invalid; nothing was imported."


def test_each_bad_field_is_named_with_its_row():
    parsed = parse_jsonl(
        jsonl(
            {"text": "fine"},
            {"text": "x" * (PROMPT_MAX_CHARS + 1)},
            {"text": "ok", "category": "poetry"},
            {"text": "ok", "language": "english!"},
            {"category": "math"},
            {"text": "ok", "categroy": "math"},
            {"text": "ok", "external_id": ["a"]},
            {"text": 5},
        ),
        max_rows=MAX_ROWS,
    )
    assert [row.row for row in parsed.rows] == [1]
    assert "too long" in parsed.errors["row 2.text"][0]
    assert parsed.errors["row 3.category"][0].startswith("Not a category; the categories are coding, math")
    assert parsed.errors["row 4.language"][0].startswith("Not a language tag")
    assert parsed.errors["row 5.text"] == ["This field is required."]
    assert parsed.errors["row 6.categroy"][0].startswith("Unknown field")
    assert "row 7.external_id" in parsed.errors
    assert parsed.errors["row 8.text"] == ["Prompt must be text, not int."]
    assert parsed.invalid_rows == 7


def test_an_external_id_twice_in_one_file_names_both_rows():
    parsed = parse_jsonl(jsonl({"text": "a", "external_id": "q1"}, {"text": "b", "external_id": "q1"}), max_rows=9)
    assert parsed.errors == {"row 2.external_id": ["The same external id as row 1."]}


def test_csv_rows_are_numbered_as_a_spreadsheet_shows_them():
    data = b'\xef\xbb\xbfText , Category\r\n"Fix my\nloop",coding\r\n,\r\nShort story,poetry\r\n'
    parsed = parse_csv(data, max_rows=MAX_ROWS)
    assert parsed.rows == [PromptRow(row=2, text="Fix my\nloop", category="coding")]
    assert list(parsed.errors) == ["row 4.category"]


def test_csv_without_a_text_column_is_refused_at_the_header():
    parsed = parse_csv(b"prompt,category\nhello,math\n", max_rows=MAX_ROWS)
    assert not parsed.ok and parsed.rows == []
    assert parsed.errors["header"][0] == "No text column; the header names prompt, category."


def test_a_row_with_more_cells_than_columns_is_an_error():
    parsed = parse_csv(b"text\nhello,extra\n", max_rows=MAX_ROWS)
    assert parsed.errors == {"row 2": ["2 cells, but the header names 1 columns."]}


def test_too_many_rows_refuse_the_file():
    parsed = parse_jsonl(jsonl(*({"text": f"p{i}"} for i in range(4))), max_rows=3)
    assert parsed.errors["file"] == ["The file has more than 3 rows; split it into smaller files."]
    assert not parsed.ok


def test_an_empty_file_has_no_rows():
    assert parse_jsonl(b"\n\n", max_rows=3).errors == {"file": ["The file has no rows."]}
    assert parse_csv(b"text\n", max_rows=3).errors == {"file": ["The file has no rows."]}


def test_only_the_first_hundred_bad_rows_are_listed_but_all_are_counted():
    parsed = parse_jsonl(b"{\n" * 150, max_rows=MAX_ROWS)
    assert parsed.invalid_rows == 150 and len(parsed.errors) == 100
    assert parsed.summary() == "150 rows are invalid (the first 100 are listed); nothing was imported."


@pytest.mark.parametrize(
    ("tag", "expected"), [("EN", "en"), ("pt-br", "pt-BR"), ("zh-hant", "zh-Hant"), ("und", "und")]
)
def test_language_tags_are_written_in_their_usual_case(tag, expected):
    assert language_normalise(tag) == expected


def test_the_format_comes_from_the_media_type_or_the_file_name():
    assert format_for("application/x-ndjson; charset=utf-8") == "jsonl"
    assert format_for("application/jsonl") == "jsonl"
    assert format_for("text/csv") == "csv"
    assert format_for("application/octet-stream", "prompts.CSV") == "csv"
    assert format_for("application/json") is None


_texts = st.text(alphabet=st.characters(codec="utf-8", exclude_characters="\x00"), min_size=1, max_size=60).filter(
    lambda t: t == t.strip() and t != ""
)
_rows = st.lists(
    st.tuples(_texts, st.sampled_from(("", *CATEGORIES)), st.sampled_from(("", "en", "pt-BR", "und"))),
    min_size=1,
    max_size=8,
)


@given(_rows)
def test_rows_written_as_jsonl_or_csv_are_parsed_back(rows):
    expected = [
        PromptRow(row=i, text=text, category=category, language=language, external_id=f"id-{i}")
        for i, (text, category, language) in enumerate(rows, start=1)
    ]
    lines = jsonl(
        *(
            {"text": r.text, "category": r.category, "language": r.language, "external_id": r.external_id}
            for r in expected
        )
    )
    assert parse_jsonl(lines, max_rows=MAX_ROWS).rows == expected

    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(["text", "category", "language", "external_id"])
    for r in expected:
        writer.writerow([r.text, r.category, r.language, r.external_id])
    parsed = parse_csv(buffer.getvalue().encode(), max_rows=MAX_ROWS)
    # CSV numbers records after the header (row 2 is the first prompt).
    assert [(r.row - 1, r.text, r.category, r.language, r.external_id) for r in parsed.rows] == [
        (r.row, r.text, r.category, r.language, r.external_id) for r in expected
    ]


# --- The service ---------------------------------------------------------------------------------


def rows_of(data: bytes) -> list[PromptRow]:
    parsed = parse_jsonl(data, max_rows=MAX_ROWS)
    assert parsed.ok, parsed.errors
    return parsed.rows


@pytest.mark.django_db
def test_import_stores_hashed_classified_prompts_and_one_audit_row(acme, alice):
    before = acme.campaign.prompts.count()
    result = services.prompts_import(
        campaign=acme.campaign,
        rows=rows_of(
            jsonl(
                {"text": "Write a Python function that reverses a list", "external_id": "a"},
                {"text": "Why is the sky blue?", "category": "knowledge", "language": "en"},
                {"text": "why is the   SKY blue?"},
            )
        ),
        actor=alice,
    )
    prompts = list(Prompt.objects.filter(pk__in=result.prompt_ids).order_by("pk"))
    assert [p.pk for p in prompts] == result.prompt_ids and acme.campaign.prompts.count() == before + 3
    assert prompts[0].category == "coding" and prompts[0].external_id == "a"  # the classifier decided
    assert prompts[0].text_hash == prompt_hash("Write a Python function that reverses a list")
    assert all(p.source == Prompt.Source.POOL and p.author == alice for p in prompts)
    assert prompts[1].text_hash == prompts[2].text_hash and result.repeated_texts == 1
    event = AuditEvent.objects.get(action=AuditAction.PROMPTS_IMPORTED)
    assert event.actor == alice and event.data["count"] == 3 and event.object_id == str(acme.campaign.pk)


@pytest.mark.django_db
def test_a_known_external_id_is_an_error_naming_the_row_or_is_skipped(acme, alice):
    services.prompts_import(
        campaign=acme.campaign, rows=rows_of(jsonl({"text": "a", "external_id": "q1"})), actor=alice
    )
    again = rows_of(jsonl({"text": "b", "external_id": "q2"}, {"text": "a2", "external_id": "q1"}))
    count = Prompt.objects.count()
    with pytest.raises(Invalid) as refused:
        services.prompts_import(campaign=acme.campaign, rows=again, actor=alice)
    assert refused.value.field_errors == {
        "row 2.external_id": ["The campaign already has a prompt with this external id."]
    }
    assert Prompt.objects.count() == count
    result = services.prompts_import(campaign=acme.campaign, rows=again, actor=alice, on_duplicate="skip")
    assert result.skipped_external_ids == ["q1"] and len(result.prompt_ids) == 1
    assert Prompt.objects.get(pk=result.prompt_ids[0]).external_id == "q2"


@pytest.mark.django_db
def test_the_same_external_id_in_another_campaign_is_fine(acme, globex, alice, charlie):
    rows = rows_of(jsonl({"text": "a", "external_id": "q1"}))
    services.prompts_import(campaign=acme.campaign, rows=rows, actor=alice)
    services.prompts_import(campaign=globex.campaign, rows=rows, actor=charlie)
    assert Prompt.objects.filter(external_id="q1").count() == 2


@pytest.mark.django_db
def test_a_closed_campaign_takes_no_prompts(acme, alice):
    Campaign.objects.filter(pk=acme.campaign.pk).update(status=Campaign.Status.CLOSED)
    with pytest.raises(Conflict, match="closed"):
        services.prompts_import(campaign=acme.campaign, rows=rows_of(jsonl({"text": "a"})), actor=alice)


# --- The console ---------------------------------------------------------------------------------


def import_url(campaign: Campaign) -> str:
    return reverse("admin:battles_campaign_import_prompts", args=[campaign.pk])


def upload(name: str, data: bytes, content_type: str = "application/octet-stream") -> SimpleUploadedFile:
    return SimpleUploadedFile(name, data, content_type=content_type)


def test_the_import_form_needs_a_file():
    form = PromptImportForm(data={"on_duplicate": "error"}, files=MultiValueDict())
    assert not form.is_valid() and "file" in form.errors
    form = PromptImportForm(
        data={"on_duplicate": "sometimes"}, files=MultiValueDict({"file": [upload("p.csv", b"text\nhi\n")]})
    )
    assert not form.is_valid() and list(form.errors) == ["on_duplicate"]
    form = PromptImportForm(
        data={"on_duplicate": "skip"}, files=MultiValueDict({"file": [upload("p.csv", b"text\nhi\n")]})
    )
    assert form.is_valid()


@pytest.mark.django_db
def test_the_campaign_page_links_to_the_import_page(acme, alice_client):
    page = alice_client.get(reverse("admin:battles_campaign_change", args=[acme.campaign.pk]))
    assert page.status_code == 200
    assert f'href="{import_url(acme.campaign)}"' in page.content.decode()


@pytest.mark.django_db
def test_a_manager_imports_a_file_from_the_console(acme, alice):
    manager = UserFactory.create(email="dora@acme.test")
    MembershipFactory.create(user=manager, organization=acme.organization, role=Role.MANAGER)
    client = login(manager)
    assert client.get(import_url(acme.campaign)).status_code == 200
    before = acme.campaign.prompts.count()
    data = b"text,category,external_id\nWhat is 2+2?,math,m1\nName three rivers,,k1\n"
    response = client.post(import_url(acme.campaign), {"file": upload("prompts.csv", data), "on_duplicate": "error"})
    assert response.status_code == 302
    assert response["Location"] == reverse("admin:battles_campaign_change", args=[acme.campaign.pk])
    assert acme.campaign.prompts.count() == before + 2
    assert Prompt.objects.get(campaign=acme.campaign, external_id="m1").category == "math"
    page = client.get(response["Location"])
    assert "2 prompts imported into Acme chat." in page.content.decode()
    assert AuditEvent.objects.get(action=AuditAction.PROMPTS_IMPORTED).actor == manager


@pytest.mark.django_db
def test_the_console_lists_every_bad_row_and_imports_nothing(acme, alice_client):
    before = Prompt.objects.count()
    data = jsonl(
        {"text": "one"}, {"text": "two"}, {"text": "three", "category": "poetry"}, {"text": "four"}, {"text": "five"}
    )
    response = alice_client.post(import_url(acme.campaign), {"file": upload("p.jsonl", data), "on_duplicate": "error"})
    assert response.status_code == 400
    body = response.content.decode()
    assert "1 row is invalid; nothing was imported." in body
    assert "<td>row 3.category</td>" in body and "Not a category" in body
    assert Prompt.objects.count() == before
    assert not AuditEvent.objects.filter(action=AuditAction.PROMPTS_IMPORTED).exists()


@pytest.mark.django_db
def test_the_console_refuses_a_file_it_cannot_read(acme, alice_client):
    response = alice_client.post(
        import_url(acme.campaign), {"file": upload("p.txt", b"hello", "text/plain"), "on_duplicate": "error"}
    )
    assert response.status_code == 200
    assert "Upload a JSON lines file" in response.content.decode()


@pytest.mark.django_db
def test_the_console_shows_the_services_refusal(acme, alice_client):
    Campaign.objects.filter(pk=acme.campaign.pk).update(status=Campaign.Status.CLOSED)
    response = alice_client.post(
        import_url(acme.campaign), {"file": upload("p.jsonl", jsonl({"text": "hi"})), "on_duplicate": "error"}
    )
    assert response.status_code == 400
    assert "The campaign is closed" in response.content.decode()


@pytest.mark.django_db
def test_another_tenants_campaign_has_no_import_page(acme, globex, charlie_client, bob_client):
    count = Prompt.objects.count()
    assert charlie_client.get(import_url(acme.campaign)).status_code == 404
    post = charlie_client.post(
        import_url(acme.campaign), {"file": upload("p.jsonl", jsonl({"text": "hi"})), "on_duplicate": "error"}
    )
    assert post.status_code == 404
    # A rater is no manager: the console does not open for them at all.
    response = bob_client.post(
        import_url(acme.campaign), {"file": upload("p.jsonl", jsonl({"text": "hi"})), "on_duplicate": "error"}
    )
    assert response.status_code == 302 and response["Location"].startswith("/admin/login/")
    assert Prompt.objects.count() == count


@pytest.mark.django_db
def test_the_textarea_of_the_campaign_form_still_adds_prompts(acme, alice_client):
    from tests.raters.admin_forms import campaign_form_data

    data = campaign_form_data(acme.campaign, new_prompts="First new prompt\n\nSecond new prompt\n")
    response = alice_client.post(reverse("admin:battles_campaign_change", args=[acme.campaign.pk]), data)
    assert response.status_code == 302
    assert Prompt.objects.filter(campaign=acme.campaign, text__endswith="new prompt").count() == 2


# --- The API -------------------------------------------------------------------------------------


def api_import_url(campaign: Campaign, query: str = "") -> str:
    return reverse("api:prompts-import", args=[campaign.pk]) + query


def post_file(client, campaign: Campaign, data: bytes, content_type: str = "application/x-ndjson", query: str = ""):  # type: ignore[no-untyped-def]
    return client.post(api_import_url(campaign, query), data=data, content_type=content_type)


FIVE = [
    {"text": "What is the capital of France?", "external_id": "e1"},
    {"text": "Write a sonnet about rain", "category": "writing"},
    {"text": "Prove that there are infinitely many primes", "category": "math", "language": "en"},
    {"text": "Sort a list in Python", "external_id": "e4"},
    {"text": "Should I learn Rust or Go?", "category": "advice", "language": "en"},
]


@pytest.mark.django_db
@pytest.mark.parametrize("content_type", ["application/x-ndjson", "application/jsonl"])
def test_a_write_key_imports_json_lines(acme, content_type):
    client = api_client(acme.organization, scope="write")
    before = acme.campaign.prompts.count()
    response = post_file(client, acme.campaign, jsonl(*FIVE), content_type)
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["campaign"] == acme.campaign.pk and body["imported"] == 5 and body["skipped"] == 0
    prompts = list(Prompt.objects.filter(pk__in=body["prompt_ids"]).order_by("pk"))
    assert [p.text for p in prompts] == [row["text"] for row in FIVE]
    assert prompts[1].category == "writing" and prompts[0].external_id == "e1"
    assert acme.campaign.prompts.count() == before + 5
    event = AuditEvent.objects.get(action=AuditAction.PROMPTS_IMPORTED)
    assert event.actor is None and event.data["via"] == "api" and event.data["count"] == 5


@pytest.mark.django_db
def test_a_manager_session_imports_csv(acme, alice_client):
    data = b'text,category,language,external_id\nWhat is 2+2?,math,en,m1\n"Say ""hi""",,,\n'
    response = post_file(alice_client, acme.campaign, data, "text/csv; charset=utf-8")
    assert response.status_code == 201, response.content
    assert Prompt.objects.get(campaign=acme.campaign, external_id="m1").category == "math"
    assert Prompt.objects.filter(campaign=acme.campaign, text='Say "hi"').exists()
    assert AuditEvent.objects.get(action=AuditAction.PROMPTS_IMPORTED).actor is not None


@pytest.mark.django_db
def test_a_multipart_upload_is_imported(acme):
    client = api_client(acme.organization, scope="write")
    response = client.post(api_import_url(acme.campaign), {"file": upload("prompts.jsonl", jsonl(*FIVE[:2]))})
    assert response.status_code == 201, response.content
    assert response.json()["imported"] == 2
    missing = client.post(api_import_url(acme.campaign), {"other": "x"})
    assert missing.status_code == 400 and "file" in missing.json()["error"]["fields"]
    wrong = client.post(api_import_url(acme.campaign), {"file": upload("prompts.txt", b"hello", "text/plain")})
    assert wrong.status_code == 415 and wrong.json()["error"]["code"] == "unsupported_media_type"


@pytest.mark.django_db
def test_a_read_key_may_not_import(acme):
    response = post_file(api_client(acme.organization, scope="read"), acme.campaign, jsonl(*FIVE))
    assert response.status_code == 403 and response.json()["error"]["code"] == "permission_denied"
    assert not Prompt.objects.filter(external_id="e1").exists()


@pytest.mark.django_db
def test_a_viewer_may_not_import_and_outsiders_do_not_find_the_campaign(acme, globex, bob_client, charlie_client):
    viewer = UserFactory.create(email="vera@acme.test")
    MembershipFactory.create(user=viewer, organization=acme.organization, role=Role.VIEWER)
    assert post_file(login(viewer), acme.campaign, jsonl(*FIVE)).status_code == 403
    for client in (bob_client, charlie_client, api_client(globex.organization, scope="write")):
        response = post_file(client, acme.campaign, jsonl(*FIVE))
        assert response.status_code == 404 and response.json()["error"]["code"] == "not_found"
    assert not Prompt.objects.filter(external_id="e1").exists()


@pytest.mark.django_db
def test_a_revoked_key_is_refused(acme):
    from raters.models import ApiKey
    from raters.services import api_key_revoke

    client = api_client(acme.organization, scope="write")
    api_key_revoke(api_key=ApiKey.objects.get(pk=client.api_key.pk), actor=None)  # type: ignore[attr-defined]
    response = post_file(client, acme.campaign, jsonl(*FIVE))
    assert response.status_code == 401 and response.json()["error"]["code"] == "authentication_failed"


@pytest.mark.django_db
def test_a_file_with_one_bad_row_imports_nothing_and_names_it(acme):
    client = api_client(acme.organization, scope="write")
    rows = [dict(row) for row in FIVE]
    rows[3]["category"] = "poetry"
    before = Prompt.objects.count()
    response = post_file(client, acme.campaign, jsonl(*rows))
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid"
    assert error["message"] == "1 row is invalid; nothing was imported."
    assert list(error["fields"]) == ["row 4.category"]
    assert all(isinstance(m, str) for m in error["fields"]["row 4.category"])
    assert Prompt.objects.count() == before
    assert not AuditEvent.objects.filter(action=AuditAction.PROMPTS_IMPORTED).exists()


@pytest.mark.django_db
def test_malformed_and_invalid_rows_are_each_reported(acme):
    client = api_client(acme.organization, scope="write")
    data = jsonl(FIVE[0]) + b'{"text": "broken"\n' + jsonl({"text": "x" * (PROMPT_MAX_CHARS + 1)})
    fields = post_file(client, acme.campaign, data).json()["error"]["fields"]
    assert fields["row 2"][0].startswith("Not valid JSON")
    assert "too long" in fields["row 3.text"][0]
    csv_fields = post_file(client, acme.campaign, b"prompt\nhello\n", "text/csv").json()["error"]["fields"]
    assert csv_fields["header"][0].startswith("No text column")


@pytest.mark.django_db
def test_a_known_external_id_is_refused_unless_skipped(acme):
    client = api_client(acme.organization, scope="write")
    assert post_file(client, acme.campaign, jsonl(FIVE[0])).status_code == 201
    again = post_file(client, acme.campaign, jsonl(FIVE[3], FIVE[0]))
    assert again.status_code == 400
    assert list(again.json()["error"]["fields"]) == ["row 2.external_id"]
    skipped = post_file(client, acme.campaign, jsonl(FIVE[3], FIVE[0]), query="?on_duplicate=skip")
    assert skipped.status_code == 201
    assert skipped.json()["skipped_external_ids"] == ["e1"] and skipped.json()["imported"] == 1
    bogus = post_file(client, acme.campaign, jsonl(FIVE[1]), query="?on_duplicate=maybe")
    assert bogus.status_code == 400 and "on_duplicate" in bogus.json()["error"]["fields"]


@pytest.mark.django_db
def test_an_oversized_body_is_413(acme, settings):
    settings.ARENA_API_MAX_BODY_BYTES = 200
    client = api_client(acme.organization, scope="write")
    response = post_file(client, acme.campaign, jsonl(*FIVE))
    assert response.status_code == 413 and response.json()["error"]["code"] == "payload_too_large"
    upload_response = client.post(api_import_url(acme.campaign), {"file": upload("p.jsonl", jsonl(*FIVE) * 3)})
    assert upload_response.status_code == 413
    assert not Prompt.objects.filter(external_id="e1").exists()


@pytest.mark.django_db
def test_too_many_rows_are_refused(acme, settings):
    settings.ARENA_PROMPT_IMPORT_MAX_ROWS = 3
    response = post_file(api_client(acme.organization, scope="write"), acme.campaign, jsonl(*FIVE))
    assert response.status_code == 400
    assert response.json()["error"]["fields"]["file"] == ["The file has more than 3 rows; split it into smaller files."]


@pytest.mark.django_db
def test_an_unsupported_content_type_is_415(acme):
    response = post_file(api_client(acme.organization, scope="write"), acme.campaign, b"{}", "application/json")
    assert response.status_code == 415 and response.json()["error"]["code"] == "unsupported_media_type"


@pytest.mark.django_db
def test_a_closed_campaign_is_409(acme):
    Campaign.objects.filter(pk=acme.campaign.pk).update(status=Campaign.Status.CLOSED)
    response = post_file(api_client(acme.organization, scope="write"), acme.campaign, jsonl(*FIVE))
    assert response.status_code == 409 and response.json()["error"]["code"] == "conflict"


def test_text_the_database_cannot_store_is_a_row_error():
    data = b'{"text": "a\\ud800"}\n{"text": "b", "external_id": "\\udc00"}\n{"text": 1' + b"1" * 5000 + b"}\n"
    errors = parse_jsonl(data, max_rows=MAX_ROWS).errors
    assert errors["row 1.text"] == ["Prompt contains an unpaired surrogate, which is not valid text."]
    assert list(errors) == ["row 1.text", "row 2.external_id", "row 3"]


@pytest.mark.django_db
def test_a_body_of_blank_lines_has_no_rows(acme):
    response = post_file(api_client(acme.organization, scope="write"), acme.campaign, b"\n\n")
    assert response.status_code == 400
    assert response.json()["error"] == {
        "code": "invalid",
        "message": "The file has no rows. Nothing was imported.",
        "fields": {"file": ["The file has no rows."]},
    }
