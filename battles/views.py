"""The rater's pages: campaigns, the blind battle, the vote and the reveal."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from typing import Any
from uuid import UUID

from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib import messages
from django.contrib.auth import login
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from core.errors import DomainError
from core.http import AuthenticatedHttpRequest, error_response
from core.ratelimits import Limit, ratelimits
from raters.selectors import user_manages_anything
from raters.tenancy import organization_scope

from . import selectors, services
from .live import Complete, Heartbeat, Paced, Void, live_channel, live_frames
from .models import Battle, Campaign, Choice, Generation, Participant, Side, Study, consent_hash
from .prompting import PROMPT_MAX_CHARS
from .rendering import answer_html, markdown_to_safe_html


def ratelimited(request: HttpRequest, exception: Exception) -> HttpResponse:
    """The 429 of the vote and next-battle limits (per account and per network address). Nothing is
    lost: the request was refused before anything was written (the open battle stays open, a vote
    sent now was not stored and can be sent again), and a prompt the rater typed is kept as their draft."""
    match = request.resolver_match
    campaign_id = match.kwargs.get("campaign_id") if match is not None else None
    prompt = request.POST.get("prompt", "") if request.method == "POST" else ""
    if campaign_id is not None and prompt.strip() and hasattr(request, "session"):
        request.session[_draft_key(int(campaign_id))] = prompt[:PROMPT_MAX_CHARS]
    response = render(
        request,
        "battles/message.html",
        {
            "title": "Slow down",
            "message": "You are sending requests faster than a person reads answers, so this one was not "
            "taken: nothing was stored, and nothing is lost. Your open battle is kept (a vote you just sent "
            "was not recorded: send it again), and so is a prompt you typed. Wait a minute and go on.",
        },
        status=429,
    )
    response["Retry-After"] = "60"
    return response


def _vote_rate(group: str, request: HttpRequest) -> str:
    return settings.ARENA_VOTE_RATE


def _battle_rate(group: str, request: HttpRequest) -> str:
    return settings.ARENA_BATTLE_RATE


# Per network address (``core.http.client_ip``, RATELIMIT_IP_META_KEY: the trusted-proxy depth
# applies), counted over every account behind it; None (an empty setting) is no limit.
def _vote_ip_rate(group: str, request: HttpRequest) -> str | None:
    return settings.ARENA_VOTE_IP_RATE or None


def _battle_ip_rate(group: str, request: HttpRequest) -> str | None:
    return settings.ARENA_BATTLE_IP_RATE or None


def _study_entry_rate(group: str, request: HttpRequest) -> str:
    return settings.ARENA_STUDY_ENTRY_RATE


def _session_key(request: HttpRequest) -> str:
    if request.session.session_key is None:
        request.session.save()
    return request.session.session_key or ""


# A prompt the rater typed but that did not start a battle (a battle was still pending, or the prompt
# was refused) is kept in the session, per campaign, and offered again pre-filled: typing is work.
def _draft_key(campaign_id: int) -> str:
    return f"arena.prompt_draft.{campaign_id}"


def _prompt_draft(request: HttpRequest, campaign_id: int) -> str:
    draft = request.session.get(_draft_key(campaign_id), "")
    return draft if isinstance(draft, str) else ""


@require_GET
@login_required
def campaign_list(request: AuthenticatedHttpRequest) -> HttpResponse:
    manages = user_manages_anything(request.user)
    managed = list(selectors.campaigns_managed_by(request.user)) if manages else []
    managed_ids = {campaign.pk for campaign in managed}
    return render(
        request,
        "battles/campaign_list.html",
        {
            "campaigns": selectors.campaigns_for_rater(request.user),
            "manages": manages,
            "managed": managed,
            # Leaderboards of campaigns listed above as managed are linked there; these are the rest (viewers).
            "boards": [c for c in selectors.campaigns_with_results_for(request.user) if c.pk not in managed_ids],
        },
    )


@require_GET
@login_required
def campaign_detail(request: AuthenticatedHttpRequest, campaign_id: int) -> HttpResponse:
    campaign = selectors.campaign_for_rater(user=request.user, campaign_id=campaign_id)
    if campaign is None:
        raise Http404("No such campaign.")
    gate = _study_gate(request, campaign, asking_for_more=False)
    if gate is not None:
        return gate
    consent_due = selectors.campaign_consent_due(campaign=campaign, user=request.user)
    return render(
        request,
        "battles/campaign_detail.html",
        {
            "campaign": campaign,
            "instructions_html": markdown_to_safe_html(campaign.instructions) if campaign.instructions else "",
            "consent_due": consent_due,
            "consent_html": markdown_to_safe_html(campaign.consent_text) if consent_due else "",
            "consent_hash": consent_hash(campaign.consent_text) if consent_due else "",
            "pending": selectors.battle_pending_for_rater(campaign=campaign, user=request.user),
            "progress": selectors.rater_progress(campaign=campaign, user=request.user),
            "prompt_max_chars": PROMPT_MAX_CHARS,
            "prompt_draft": _prompt_draft(request, campaign.pk),
        },
    )


@require_POST
@login_required
def campaign_consent(request: AuthenticatedHttpRequest, campaign_id: int) -> HttpResponse:
    """The rater's answer to the campaign's consent text: agreeing is recorded (for the text the page
    showed) and leads back to the campaign's page and its start button; not agreeing records nothing
    and says that battles need it."""
    campaign = selectors.campaign_for_rater(user=request.user, campaign_id=campaign_id)
    if campaign is None:
        raise Http404("No such campaign.")
    if request.POST.get("agree") != "yes":
        return render(
            request,
            "battles/message.html",
            {
                "title": "No battles without consent",
                "message": "You have not agreed, so no battle is shown. You can come back to this campaign's "
                "page and agree at any time.",
                "campaign": campaign,
            },
        )
    try:
        services.campaign_consent_agree(campaign=campaign, user=request.user, text_hash=request.POST.get("text", ""))
    except DomainError as exc:
        return error_response(
            request, exc, "battles/message.html", {"title": "Please read it again", "campaign": campaign}
        )
    return redirect("battles:campaign", campaign_id=campaign.pk)


@require_POST
@login_required
@ratelimits(Limit("user", _battle_rate), Limit("ip", _battle_ip_rate, group="battles.next.ip"))
def battle_next(request: AuthenticatedHttpRequest, campaign_id: int) -> HttpResponse:
    now = timezone.now()
    # The rater's pool and standing (an open battle? the session cap's count) are read with it, as of now.
    campaign = selectors.campaign_for_next(user=request.user, campaign_id=campaign_id, now=now)
    if campaign is None:
        raise Http404("No such campaign.")
    gate = _study_gate(request, campaign, asking_for_more=True)
    if gate is not None:
        return gate
    if selectors.campaign_consent_due(campaign=campaign, user=request.user):
        # No battle before the rater has agreed to the campaign's consent text (on its page).
        return redirect("battles:campaign", campaign_id=campaign.pk)
    prompt_text = request.POST.get("prompt") if "prompt" in request.POST else None
    if prompt_text is not None and prompt_text.strip() and campaign.allow_rater_prompts:
        request.session[_draft_key(campaign.pk)] = prompt_text[:PROMPT_MAX_CHARS]
    try:
        assignment = services.battle_assign(
            campaign=campaign, user=request.user, session_key=_session_key(request), prompt_text=prompt_text, now=now
        )
    except services.CapReached as exc:
        # The end of a stint, not a refusal: a thank-you page with 200 (429 is for rate limits), and
        # no button to start another battle.
        return render(
            request,
            "battles/message.html",
            {
                "title": "That is all for now",
                "message": exc.message,
                "campaign": campaign,
            },
        )
    except DomainError as exc:
        return error_response(
            request, exc, "battles/message.html", {"title": "No battle for now", "campaign": campaign}
        )
    if prompt_text is not None:
        if assignment.resumed:
            messages.info(
                request, "Finish this battle first. Your prompt is kept: it will be waiting for you after your vote."
            )
        else:
            request.session.pop(_draft_key(campaign.pk), None)
    return redirect("battles:battle", battle_id=assignment.battle.pk)


def _answer_html(generation: Generation | None) -> str:
    """A stored answer as its pane shows it: the HTML rendered when it was stored, or its text rendered now."""
    if generation is None:
        return answer_html("")
    return answer_html(generation.text, generation.text_html, generation.text_html_version)


def _battle_context(request: AuthenticatedHttpRequest, battle: Battle) -> dict[str, object]:
    by_turn: dict[int, dict[str, Generation]] = {}
    for generation in selectors.battle_generations(battle):
        by_turn.setdefault(generation.turn, {})[generation.side] = generation
    turns = selectors.battle_turns_given(battle, by_turn)
    current = len(turns)  # the turn shown in the panes (being generated, or the latest answered)
    generations = by_turn.get(current, {})
    revealed = battle.status == Battle.Status.VOTED
    streaming = services.battle_streams(battle)  # the panes fill from the stream, at its pace
    # Earlier turns of a multi-turn battle: what the rater asked and both answers, as they were shown.
    messages = [battle.prompt.text, *(turn.text for turn in turns)]
    history = [
        {
            "number": index + 1,
            "prompt_html": markdown_to_safe_html(messages[index]),
            "panes": [
                {"label": label, "html": _answer_html(by_turn.get(index, {}).get(side))}
                for side, label in ((Side.LEFT, "A"), (Side.RIGHT, "B"))
            ],
        }
        for index in range(current)
    ]
    panes = []
    for side, label in ((Side.LEFT, "A"), (Side.RIGHT, "B")):
        shown = generations.get(side)
        pane: dict[str, object] = {
            "label": label,
            "html": _answer_html(shown) if shown and battle.status != Battle.Status.VOID and not streaming else "",
        }
        if revealed and shown is not None:
            competitor = battle.left if side == Side.LEFT else battle.right
            every = [by_turn[t][side] for t in sorted(by_turn) if side in by_turn[t]]
            pane.update(
                {
                    "model": competitor.model_name,
                    "version": competitor.version_label,
                    "latency_s": sum(g.latency_s for g in every),
                    "tokens": sum(g.output_tokens for g in every),
                    "finish_reason": shown.finish_reason,
                }
            )
        panes.append(pane)
    campaign = battle.campaign
    position, progress = selectors.battle_page_counts(battle=battle, user=request.user)
    return {
        "battle": battle,
        "streaming": streaming,
        "campaign": campaign,
        "prompt_html": markdown_to_safe_html(messages[current]),
        "history": history,
        "turn_number": current + 1,
        # Offered while the turn streams too, disabled until both answers are complete (stream.js).
        "can_continue": (battle.status == Battle.Status.READY or streaming)
        and battle.source == Battle.Source.GENERATED
        and campaign.status == Campaign.Status.OPEN
        and current + 1 < campaign.max_turns,
        "panes": panes,
        "revealed": revealed,
        "vote": battle.vote if revealed else None,
        # Only where the campaign says so: a gold battle's reveal otherwise shows neutral labels only.
        "gold_feedback": (battle.vote.choice == battle.gold_expected)
        if revealed and battle.source == Battle.Source.GOLD and campaign.gold_feedback
        else None,
        "choices": Choice.choices,
        "position": position if battle.status != Battle.Status.VOID else None,
        # A battle got before this session window (carried over from an earlier login): numbered in that one.
        "earlier_session": selectors.battle_taken_in_earlier_session(battle),
        "progress": progress,
        "study": _study_progress(request, campaign),
        "prompt_max_chars": PROMPT_MAX_CHARS,
        "prompt_draft": _prompt_draft(request, campaign.pk)
        if battle.status not in (Battle.Status.READY, Battle.Status.GENERATING)
        else "",
        "preparing": battle.status == Battle.Status.GENERATING and not battle.live,
    }


@require_GET
@login_required
def battle_detail(request: AuthenticatedHttpRequest, battle_id: str) -> HttpResponse:
    battle = selectors.battle_page_for_rater(user=request.user, battle_id=battle_id)  # its counts read with it
    if battle is None:
        raise Http404("No such battle.")
    gate = _study_gate(request, battle.campaign, asking_for_more=False)
    if gate is not None:
        return gate
    if not services.battle_streams(battle):  # a streamed battle is stamped when its stream completes
        battle = services.battle_mark_shown(battle=battle)
    response = render(request, "battles/battle.html", _battle_context(request, battle))
    response["Cache-Control"] = "no-store"
    return response


@require_GET
@login_required
def battle_state(request: AuthenticatedHttpRequest, battle_id: str) -> JsonResponse:
    """What the "preparing" page polls: the battle's state only (generating, ready, void, voted)."""
    battle = selectors.battle_for_rater(user=request.user, battle_id=battle_id)
    if battle is None:
        raise Http404("No such battle.")
    services.battle_generation_nudge(battle)  # a lost generation task is sent again
    response = JsonResponse({"status": battle.status})
    response["Cache-Control"] = "no-store"
    return response


@require_POST
@login_required
@ratelimits(Limit("user", _vote_rate), Limit("ip", _vote_ip_rate, group="battles.vote.ip"))
def battle_vote(request: AuthenticatedHttpRequest, battle_id: str) -> HttpResponse:
    # What the log takes of its answers is read with it.
    battle = selectors.battle_with_answers_logged(user=request.user, battle_id=battle_id)
    if battle is None:
        raise Http404("No such battle.")
    gate = _study_gate(request, battle.campaign, asking_for_more=False)
    if gate is not None:
        return gate
    try:
        # The battle read above is handed on: the service checks it and settles races with its
        # conditional update, so one vote reads the battle once.
        vote = services.vote_submit(
            battle_id=battle_id, user=request.user, choice=request.POST.get("choice", ""), battle=battle
        )
    except DomainError as exc:
        battle = selectors.battle_for_rater(user=request.user, battle_id=battle_id)
        if battle is None:
            raise Http404("No such battle.") from None
        context = _battle_context(request, battle)
        context["error"] = exc.message
        return error_response(request, exc, "battles/battle.html", context)
    # Checked after every vote, not only a gold one: the page after a vote never tells which was a check.
    warning = services.attention_warning(campaign=vote.campaign, user=request.user)
    if warning is not None:
        messages.warning(request, warning)
    return redirect("battles:battle", battle_id=battle_id)


@require_POST
@login_required
@ratelimits(Limit("user", _vote_rate), Limit("ip", _vote_ip_rate, group="battles.continue.ip"))
def battle_continue(request: AuthenticatedHttpRequest, battle_id: str) -> HttpResponse:
    """The rater's next turn in a multi-turn battle (``text``): sent to both models, then the same page."""
    battle = selectors.battle_for_rater(user=request.user, battle_id=battle_id)
    gate = _study_gate(request, battle.campaign, asking_for_more=False) if battle is not None else None
    if gate is not None:
        return gate
    try:
        services.battle_continue(battle_id=battle_id, user=request.user, text=request.POST.get("text", ""))
    except DomainError as exc:
        battle = selectors.battle_for_rater(user=request.user, battle_id=battle_id)
        if battle is None:
            raise Http404("No such battle.") from None
        context = _battle_context(request, battle)
        context["error"] = exc.message
        context["turn_draft"] = request.POST.get("text", "")[:PROMPT_MAX_CHARS]
        return error_response(request, exc, "battles/battle.html", context)
    return redirect("battles:battle", battle_id=battle_id)


# --- Live battles: server-sent events (ASGI) ----------------------------------------------------------

HEARTBEAT_S = 15.0


def _sse(event: str, data: dict[str, object]) -> str:
    return f"event: {event}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n"


def _battle_fresh(battle_id: UUID) -> Battle:
    return Battle.objects.get(pk=battle_id)


def _battle_complete(battle_id: UUID) -> dict[str, object]:
    """Both answers (of the current turn) were shown in full: stamp it (decision time counts from here)
    and render both with the one sanitising renderer."""
    battle = services.battle_mark_shown(battle=Battle.objects.get(pk=battle_id))
    turn = battle.turns.count()
    generations = {g.side: g for g in battle.generations.filter(turn=turn)}
    return {"a": _answer_html(generations.get(Side.LEFT)), "b": _answer_html(generations.get(Side.RIGHT))}


async def _battle_events(battle: Battle) -> AsyncIterator[str]:
    """Only text goes out: the panes' words, paced; at the end both answers rendered. No timing, no
    token counts, nothing that tells the sides apart."""
    yield "retry: 2000\n\n"
    if battle.status == Battle.Status.VOID:
        yield _sse("void", {"message": battle.void_reason})
        return
    if not services.battle_streams(battle):
        # Shown already, or never streamed: both full answers at once.
        yield _sse("complete", await sync_to_async(_battle_complete)(battle.pk))
        return
    channel = live_channel()
    recorded = battle.status == Battle.Status.READY
    turn = await sync_to_async(battle.turns.count)()
    try:
        async for output in live_frames(
            services.battle_live_key(battle, turn), channel, heartbeat_s=HEARTBEAT_S, recorded=recorded
        ):
            if isinstance(output, Paced):
                yield _sse("frame", {"a": output.a, "b": output.b, "reset": output.reset})
            elif isinstance(output, Complete):
                yield _sse("complete", await sync_to_async(_battle_complete)(battle.pk))
                return
            elif isinstance(output, Void):
                current = await sync_to_async(_battle_fresh)(battle.pk)
                yield _sse("void", {"message": current.void_reason})
                return
            elif isinstance(output, Heartbeat):
                yield ": keep-alive\n\n"
                current = await sync_to_async(_battle_fresh)(battle.pk)
                if current.status == Battle.Status.VOID:
                    yield _sse("void", {"message": current.void_reason})
                    return
                if current.status != Battle.Status.GENERATING:
                    # Recorded while this reader saw nothing of it (the channel expired or lost items).
                    yield _sse("complete", await sync_to_async(_battle_complete)(battle.pk))
                    return
    finally:
        close = getattr(channel, "aclose", None)
        if close is not None:
            await close()


@require_GET
@login_required
async def battle_stream(request: HttpRequest, battle_id: str) -> StreamingHttpResponse:
    """``GET /b/<id>/stream``: the live battle's server-sent events, for its own rater only (anyone
    else: 404, like the page)."""
    user = await request.auser()
    battle = await sync_to_async(selectors.battle_for_rater)(user=user, battle_id=battle_id)  # type: ignore[arg-type]
    if battle is None:
        raise Http404("No such battle.")
    response = StreamingHttpResponse(_battle_events(battle), content_type="text/event-stream; charset=utf-8")
    response["Cache-Control"] = "no-store"
    response["X-Accel-Buffering"] = "no"  # a buffering proxy (nginx) would hold the frames back
    return response


# --- Crowd studies: the vendor's link, consent, progress, the completion code --------------------------

_PROLIFIC_ID = re.compile(r"^[0-9a-f]{24}$")
# Other vendors' ids (MTurk's are upper-case alphanumerics; others use - _ . : @): a safe charset only.
_GENERIC_ID = re.compile(r"^[A-Za-z0-9_.:@-]{1,64}$")
_GENERIC_ASSIGNMENT = re.compile(r"^[A-Za-z0-9_.:@-]{1,128}$")


# The completed page sends the participant on to the vendor's completion URL after this many seconds
# (a meta refresh: no script, so the site's CSP is unchanged), long enough to read and note the code.
STUDY_COMPLETION_REDIRECT_S = 5


def _study_not_found(request: HttpRequest) -> HttpResponse:
    return render(
        request,
        "battles/study.html",
        {"state": "missing", "title": "Study not found"},
        status=404,
    )


def _vendor_ids(study: Study, query: Any) -> tuple[dict[str, str], str | None]:
    """The vendor's ids from the link's query string, or why they are refused."""
    if study.vendor == Study.Vendor.PROLIFIC:
        pid = query.get("PROLIFIC_PID", "").strip().lower()
        study_id = query.get("STUDY_ID", "").strip().lower()
        session_id = query.get("SESSION_ID", "").strip().lower()
        if not _PROLIFIC_ID.match(pid):
            return {}, "The link is missing a valid Prolific participant id (PROLIFIC_PID)."
        for name, value in (("STUDY_ID", study_id), ("SESSION_ID", session_id)):
            if value and not _PROLIFIC_ID.match(value):
                return {}, f"The link's {name} is not a valid Prolific id."
        return {"vendor_participant_id": pid, "vendor_study_id": study_id, "external_session_id": session_id}, None
    worker = query.get("worker_id", "").strip()
    assignment = query.get("assignment_id", "").strip()
    if not _GENERIC_ID.match(worker):
        return {}, "The link is missing a valid worker id (worker_id: letters, digits and - _ . : @, 64 at most)."
    if assignment and not _GENERIC_ASSIGNMENT.match(assignment):
        return {}, "The link's assignment_id is not valid (letters, digits and - _ . : @, 128 at most)."
    return {"vendor_participant_id": worker, "external_session_id": assignment}, None


# An attribute's value from the link: printable text, no markup characters (it is shown in the console and
# on boards, escaped, but there is no reason to accept more), 100 characters at most.
_ATTRIBUTE_VALUE = re.compile(r"^[\w .,:;@'()/+-]{1,100}$")


def _vendor_attributes(study: Study, query: Any) -> dict[str, str]:
    """The rater attributes the study reads from its link (``Study.attribute_parameters``): each parameter
    present with a valid value, as attribute key -> value. A missing or malformed value is skipped, not
    refused: the attributes describe the participant, and a paid participant is never turned away for them."""
    out: dict[str, str] = {}
    for parameter, key in (study.attribute_parameters or {}).items():
        value = query.get(parameter, "").strip()
        if value and _ATTRIBUTE_VALUE.match(value):
            out[key] = value
    return out


def _study_page(request: HttpRequest, participant: Participant, *, reentry: bool = False) -> HttpResponse:
    """The participant's page of the study, whatever their state: consent, instructions and the start,
    time up, declined, or the completion code."""
    study = participant.study
    state = participant.status
    if state == Participant.Status.ACTIVE and study.consent_text and participant.consented_at is None:
        state = "consent"
    votes = selectors.votes_by_rater(campaign=study.campaign, user=participant.user)
    response = render(
        request,
        "battles/study.html",
        {
            "state": state,
            "title": study.name,
            "study": study,
            "participant": participant,
            "campaign": study.campaign,
            "votes": min(votes, study.target_votes),
            "pending": selectors.battle_pending_for_rater(campaign=study.campaign, user=participant.user),
            "instructions_html": markdown_to_safe_html(study.instructions) if study.instructions else "",
            "consent_html": markdown_to_safe_html(study.consent_text) if study.consent_text else "",
            "completion_link": study.completion_link(),
            "redirect_s": STUDY_COMPLETION_REDIRECT_S,
            "reentry": reentry,
        },
    )
    response["Cache-Control"] = "no-store"
    return response


@require_GET
@ratelimits(Limit("ip", _study_entry_rate))
def study_enter(request: HttpRequest, slug: str) -> HttpResponse:
    """``GET /s/<slug>/?PROLIFIC_PID=…`` (or ``?worker_id=…``): the vendor sends participants here.
    Creates or resumes the participant's account (no password) and logs them in, whichever browser
    they come back in: the vendor vouches for the id, and a participant whose browser crashed must
    not be locked out of a study they are paid for. Someone who already completed is shown their
    code again and nothing else happens."""
    study = selectors.study_by_slug(slug)
    if study is None or not study.active:
        return _study_not_found(request)
    ids, problem = _vendor_ids(study, request.GET)
    if problem is not None:
        return render(
            request, "battles/study.html", {"state": "bad_link", "title": study.name, "message": problem}, status=400
        )
    with organization_scope(study.organization_id):  # the link is the credential: the study's organisation
        try:
            participant, _ = services.participant_enter(
                study=study, attributes=_vendor_attributes(study, request.GET), **ids
            )
        except services.ParticipantInAnotherStudy as refused:
            # Nothing is created and nobody is logged in; the page does not name the other study.
            return render(
                request,
                "battles/study.html",
                {"state": "elsewhere", "title": study.name, "message": str(refused)},
                status=409,
            )
        participant = services.participant_refresh(participant=participant)
    if participant.status != Participant.Status.ACTIVE:
        # Completed, declined or out of time: the page says so; the account is not logged in again.
        return _study_page(request, participant, reentry=True)
    if request.user.pk != participant.user_id:
        login(request, participant.user, backend="django.contrib.auth.backends.ModelBackend")
    return redirect("battles:study", slug=study.slug)


def _participant_for_slug(request: AuthenticatedHttpRequest, slug: str) -> Participant:
    study = selectors.study_by_slug(slug)
    participant = selectors.participant_in_study(study=study, user=request.user) if study is not None else None
    if participant is None:
        raise Http404("No such study.")
    return participant


@require_GET
@login_required
def study_home(request: AuthenticatedHttpRequest, slug: str) -> HttpResponse:
    participant = services.participant_refresh(participant=_participant_for_slug(request, slug))
    return _study_page(request, participant)


@require_POST
@login_required
def study_leave(request: AuthenticatedHttpRequest, slug: str) -> HttpResponse:
    """The participant's "Leave the study": their part ends (no code) and an open battle is voided."""
    participant = services.participant_leave(participant=_participant_for_slug(request, slug))
    return redirect("battles:study", slug=participant.study.slug)


@require_POST
@login_required
def study_consent(request: AuthenticatedHttpRequest, slug: str) -> HttpResponse:
    participant = services.participant_refresh(participant=_participant_for_slug(request, slug))
    if participant.status == Participant.Status.ACTIVE:
        participant = services.participant_consent(participant=participant, agree=request.POST.get("agree") == "yes")
    return redirect("battles:study", slug=participant.study.slug)


def _study_gate(request: AuthenticatedHttpRequest, campaign: Campaign, *, asking_for_more: bool) -> HttpResponse | None:
    """For a study participant: no battle before consent, none after their time is up or their part
    ended, and none of another campaign (404, as for anyone not in its pools). ``asking_for_more``:
    a request for a new battle, refused once the target is reached (the study page then completes
    them and shows the code). None: carry on."""
    participant = selectors.participant_of_user(request.user)
    if participant is None:
        return None
    if participant.study.campaign_id != campaign.pk:
        raise Http404("No such campaign.")
    participant = services.participant_refresh(participant=participant, complete=asking_for_more)
    study_url = redirect("battles:study", slug=participant.study.slug)
    if participant.status != Participant.Status.ACTIVE:
        return study_url
    if participant.study.consent_text and participant.consented_at is None:
        return study_url
    if (
        asking_for_more
        and selectors.votes_by_rater(campaign=campaign, user=request.user) >= participant.study.target_votes
    ):
        return study_url
    return None


def _study_progress(request: AuthenticatedHttpRequest, campaign: Campaign) -> dict[str, object] | None:
    participant = selectors.participant_of_user(request.user)
    if participant is None or participant.study.campaign_id != campaign.pk:
        return None
    votes = selectors.votes_by_rater(campaign=campaign, user=request.user)
    target = participant.study.target_votes
    return {"votes": min(votes, target), "target": target, "done": votes >= target, "slug": participant.study.slug}
