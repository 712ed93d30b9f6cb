"""The manager's console: the Django admin, open to owners and managers of an organisation only.

Its index is grouped by task, not by app: a "Start here" guide to a first campaign, then Run, Quality,
Results, LLM judges, Integrations and Organisation and access, each entry with a line on what it is for
(``CONSOLE_GROUPS``). The entries are the admin's own app list, so a user sees only what they may see; a
model missing from the groups is listed under "Other" rather than hidden."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.template.response import TemplateResponse

from raters.selectors import user_manages_anything

# (group title, ((app_label.model_name, purpose), ...)), in the order of the page.
CONSOLE_GROUPS: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = (
    (
        "Run a campaign",
        (
            ("battles.campaign", "Each comparison: its set-up checklist, competitors, prompts, pools and settings."),
            ("serving.modelendpoint", "The models campaigns call (a Triton server and model); health and outages."),
            ("battles.competitor", "Every competitor of your campaigns: family, retire (added on a campaign's page)."),
            ("battles.prompt", "Every prompt of your campaigns: category, language, deactivate."),
            ("battles.battle", "Battles generated and served, with their answers (read-only)."),
            ("battles.study", "Crowd studies for Prolific and other vendors: a link, a quota, a completion code."),
            ("battles.participant", "The participants of crowd studies and their progress."),
        ),
    ),
    (
        "Quality",
        (
            ("battles.golditem", "Battles with a known answer and attention checks, mixed into what raters see."),
            ("battles.qualification", "Raters' qualification outcomes (gold battles before real ones)."),
            ("raters.raterflag", "Raters flagged by the checks; clear a flag to count their votes again."),
        ),
    ),
    (
        "Results",
        (
            ("battles.vote", "The append-only vote log (read-only; export it from the API or the dashboard)."),
            ("ranking.boardpublication", "Publish a campaign's leaderboard for anyone to read."),
        ),
    ),
    (
        "LLM judges and attribute boards",
        (
            ("battles.rubric", "The questions and criteria judges answer, versioned."),
            ("battles.judge", "LLM judges: a model endpoint and a rubric."),
            ("battles.judgerun", "A judge's pass over a campaign's battles."),
            ("battles.judgeverdict", "The judges' verdict log (read-only)."),
            ("ranking.judgeboard", "Leaderboards computed from a judge's verdicts."),
            ("ranking.judgecalibration", "How far a judge agrees with the raters."),
            ("ranking.attributeboard", "Boards ranked on an attribute by a ratio judge."),
            ("ranking.attributeentity", "The entities an attribute board ranks."),
            ("ranking.attributerun", "A ratio judge's pass over an attribute board."),
            ("ranking.attributejudgement", "The ratio judge's judgements (read-only)."),
        ),
    ),
    (
        "Integrations",
        (
            ("raters.apikey", "Keys for external teams and scripts (the REST API)."),
            ("raters.webhookendpoint", "URLs the platform POSTs events to (owners only)."),
            ("raters.webhookdelivery", "Each webhook delivery and its outcome."),
            ("battles.experiment", "Sticky A/B assignment of your own units, over the API."),
            ("ranking.promotion", "A board's winner rolled out through an experiment in stages, watched on the board."),
        ),
    ),
    (
        "Organisation and access",
        (
            ("raters.organization", "Your organisations."),
            ("raters.membership", "Who belongs to them, and their role (owner, manager, rater, viewer)."),
            ("raters.raterpool", "Groups of raters; a campaign names the pools that may vote in it."),
            ("raters.invitation", "Links that add raters to a pool."),
            ("raters.raterattribute", "Raters' attributes (expertise, language...): the segments of the boards."),
            ("raters.auditevent", "Every change made in the console or over the API (read-only)."),
        ),
    ),
)

# The guide to a first campaign: (model whose page the step starts on, whether it starts on the add form, what to
# do). Competitors, prompts and opening are done on the campaign's page, whose checklist shows each step's state.
START_STEPS: tuple[tuple[str, bool, str], ...] = (
    ("battles.campaign", True, "Create the campaign: a name, what it compares, how raters should judge."),
    ("serving.modelendpoint", True, "Add a model endpoint per model to compare; each is checked when saved."),
    ("battles.campaign", False, "On the campaign's page, add two or more competitors and paste prompts."),
    ("raters.raterpool", True, "Create a rater pool, tick it on the campaign, and invite raters with a link."),
    ("battles.campaign", False, "Open the campaign from its checklist: raters find it on their home page."),
)


@dataclass(frozen=True)
class ConsoleEntry:
    name: str
    purpose: str
    admin_url: str | None
    add_url: str | None


@dataclass(frozen=True)
class StartStep:
    text: str
    url: str | None


def _models_by_key(app_list: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {f"{app['app_label']}.{model['object_name'].lower()}": model for app in app_list for model in app["models"]}


def console_groups(app_list: list[dict[str, Any]]) -> list[tuple[str, list[ConsoleEntry]]]:
    """The admin's app list (what this user may see) regrouped by task; models no group names go to "Other"."""
    models = {
        f"{app['app_label']}.{model['object_name'].lower()}": model for app in app_list for model in app["models"]
    }
    placed: set[str] = set()
    groups: list[tuple[str, list[ConsoleEntry]]] = []
    for title, entries in (*CONSOLE_GROUPS, ("Other", tuple((key, "") for key in sorted(models)))):
        rows = []
        for key, purpose in entries:
            model = models.get(key)
            if model is None or key in placed:
                continue
            placed.add(key)
            rows.append(ConsoleEntry(str(model["name"]), purpose, model.get("admin_url"), model.get("add_url")))
        if rows:
            groups.append((title, rows))
    return groups


def start_steps(app_list: list[dict[str, Any]]) -> list[StartStep]:
    """The numbered guide, each step linked to its page where this user may open it."""
    models = {
        f"{app['app_label']}.{model['object_name'].lower()}": model for app in app_list for model in app["models"]
    }
    return [
        StartStep(text, models.get(key, {}).get("add_url" if add else "admin_url")) for key, add, text in START_STEPS
    ]


class ArenaAdminSite(admin.AdminSite):
    site_header = "Arena — campaign console"
    site_title = "Arena console"
    index_title = "Campaign console"
    index_template = "admin/arena_index.html"

    def has_permission(self, request: HttpRequest) -> bool:
        # Managers are not Django "staff": their rights come from their memberships, and each
        # ModelAdmin narrows every query to the organisations they manage.
        return user_manages_anything(request.user)

    def login(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> HttpResponse:
        if request.user.is_authenticated:
            return redirect("battles:campaigns")
        return redirect("/accounts/login/?" + urlencode({"next": request.GET.get("next", "/admin/")}))

    def index(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> TemplateResponse:
        app_list = self.get_app_list(request)
        context = {"task_groups": console_groups(app_list), "start_steps": start_steps(app_list)}
        return super().index(request, {**context, **(extra_context or {})})
