"""Fair dual streaming end to end: a live battle's server-sent events (``GET /b/<id>/stream``), read
through Django's ASGI request path (AsyncClient, the async middleware chain, the async view), with
arrivals published to the real live channel (Redis Streams when REDIS_URL is set, else the in-process
one; both are run), by the test on a timeline it controls or by the real generation task."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.contrib.auth.models import User
from django.db import connections
from django.test import AsyncClient
from django.urls import reverse

from battles import live, services
from battles.models import Battle, Generation
from battles.pacing import SideTimeline, pace
from raters.tenancy import scopes_disabled
from serving.triton.client import GenerationResult
from tests.conftest import Tenant
from tests.factories import MembershipFactory, PromptFactory, UserFactory

# Transactional: in most tests another thread (a publisher, the generation task) records the battle over
# its own connection, which sees only committed rows. A test where no other thread touches the database
# is marked ``in_test_transaction`` instead (Django's rolled-back test transaction, no flush of every
# table after it): the ASGI view's ORM calls run through ``sync_to_async``, thread-sensitive, so in the
# test's own thread and its transaction.
pytestmark = pytest.mark.django_db(transaction=True)
in_test_transaction = pytest.mark.django_db


@pytest.fixture(params=["redis", "memory"])
def channel_kind(request: pytest.FixtureRequest, settings: Any) -> str:
    if request.param == "memory":
        settings.REDIS_URL = None
    elif not settings.REDIS_URL:
        pytest.skip("REDIS_URL is not set (scripts/test sets it)")
    return str(request.param)


def live_battle(tenant: Tenant, rater: User) -> Battle:
    prompt = PromptFactory.create(campaign=tenant.campaign, source="rater", author=rater)
    return Battle.objects.create(
        organization=tenant.organization,
        campaign=tenant.campaign,
        rater=rater,
        pool=tenant.pool,
        prompt=prompt,
        left=tenant.left,
        right=tenant.right,
        params={**tenant.campaign.sampling_params(), "seed": 7},
        live=True,
    )


@dataclass
class Stream:
    status: int
    headers: dict[str, str]
    raw: str = ""
    events: list[tuple[str, dict[str, Any], float]] = field(default_factory=list)  # (event, data, when)


def read_stream(
    user: User | None,
    battle: Battle,
    *,
    timeout_s: float = 30.0,
    connected: threading.Event | None = None,
    first_event: threading.Event | None = None,
) -> Stream:
    """GET the stream as ``user`` through the ASGI path, until it ends or a complete/void event.
    For a thread that must act only after it: ``connected`` is set once the view has answered (its
    stream about to be read), ``first_event`` once the first event has come."""

    async def run() -> Stream:
        client = AsyncClient()
        if user is not None:
            await client.aforce_login(user)
        response = await client.get(reverse("battles:stream", args=[battle.pk]))
        if connected is not None:
            connected.set()
        stream = Stream(response.status_code, {k: v for k, v in response.items()})
        if not getattr(response, "streaming", False):
            return stream
        buffer = ""
        deadline = time.monotonic() + timeout_s
        async for chunk in response.streaming_content:  # type: ignore[attr-defined]
            text = chunk.decode()
            stream.raw += text
            buffer += text
            while "\n\n" in buffer:
                block, buffer = buffer.split("\n\n", 1)
                lines = dict(line.split(": ", 1) for line in block.split("\n") if ": " in line and line[0] != ":")
                if "event" in lines:
                    stream.events.append((lines["event"], json.loads(lines["data"]), time.monotonic()))
                    if first_event is not None:
                        first_event.set()
                    if lines["event"] in ("complete", "void"):
                        return stream
            assert time.monotonic() < deadline, "the stream did not end"
        return stream

    return async_to_sync(run)()


def steady(words: list[str], first: float, gap: float) -> SideTimeline:
    arrivals = tuple((first + i * gap, w + ("" if i == len(words) - 1 else " ")) for i, w in enumerate(words))
    return SideTimeline(arrivals, first + (len(words) - 1) * gap)


def publish_in_time(
    battle: Battle,
    left: SideTimeline,
    right: SideTimeline,
    *,
    record: bool = True,
    after: threading.Event | None = None,
) -> tuple[threading.Thread, dict[str, float]]:
    """Publish both timelines to the battle's channel in real time (the stored ``t`` exactly as given,
    marks between arrivals as the worker's publisher does), then record the battle and publish its end.
    ``after``: the timelines start once it is set (a reader connected: it watches them from their start,
    however long a loaded machine took to connect it)."""
    channel = live.live_channel()
    items: list[tuple[float, int, str, bool]] = []
    for side, timeline in enumerate((left, right)):
        items += [(t, side, d, False) for t, d in timeline.arrivals]
        assert timeline.done is not None
        items.append((timeline.done, side, "", True))
    items.sort(key=lambda e: (e[0], e[1], e[3]))
    seen: dict[str, float] = {}

    def run() -> None:
        if after is not None:
            after.wait(20)
        origin = time.monotonic()
        last = -1.0
        for t, side, delta, done in items:
            while (now := time.monotonic() - origin) < t - 0.025:
                mark = max(now, last + 1e-6)
                if mark < t:
                    channel.publish(str(battle.pk), live.LiveItem(kind="mark", t=mark))
                    last = mark
                time.sleep(0.02)
            time.sleep(max(0.0, t - (time.monotonic() - origin)))
            t = max(t, last + 1e-6)
            seen.setdefault(f"first-{side}", time.monotonic())
            channel.publish(str(battle.pk), live.LiveItem(kind="chunk", t=t, side=side, delta=delta, done=done))
            last = t
        seen["done"] = time.monotonic()
        if record:
            texts = ["".join(d for _, d in timeline.arrivals) for timeline in (left, right)]
            with scopes_disabled():
                recorded = services.battle_generations_record(
                    battle=Battle.objects.get(pk=battle.pk),
                    left=GenerationResult(texts[0], len(texts[0].split()), "stop", 1.23, ttft_s=0.11),
                    right=GenerationResult(texts[1], len(texts[1].split()), "stop", 4.56, ttft_s=0.44),
                )
            channel.publish(str(battle.pk), live.LiveItem(kind="end", t=last + 1e-3, status=recorded.status))
            connections.close_all()
        channel.close_publisher()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, seen


def shown_states(stream: Stream) -> list[tuple[str, str]]:
    """The panes' text after each frame, as the page's script builds it."""
    panes = ["", ""]
    states = []
    for event, data, _ in stream.events:
        if event != "frame":
            continue
        panes = [data["a"], data["b"]] if data["reset"] else [panes[0] + data["a"], panes[1] + data["b"]]
        states.append((panes[0], panes[1]))
    return states


def offline_states(left: SideTimeline, right: SideTimeline) -> list[tuple[str, str]]:
    frames, pacer = pace(left, right)
    return [(pacer.text(0, f.units[0]), pacer.text(1, f.units[1])) for f in frames]


def _is_ordered_subsequence(shown: list[tuple[str, str]], timeline: list[tuple[str, str]]) -> bool:
    position = iter(timeline)
    return all(any(state == candidate for candidate in position) for state in shown)


FAST = [f"quick{i}" for i in range(24)]
SLOW = [f"steady{i}" for i in range(10)]


def test_frames_follow_the_common_pace_and_the_vote_opens_only_at_the_end(
    channel_kind: str, acme: Tenant, bob: User
) -> None:
    battle = live_battle(acme, bob)
    # Left: fast and longer. The slow side's pace sets the stream's length (the 24 words at one every
    # 43 ms: about 1.2 s, 22 frames of the pacer's 50 ms; 43 ms, so that no word falls on a tick, where
    # rounding would decide between two frames).
    left, right = steady(FAST, 0.05, 0.02), steady(SLOW, 0.20, 0.043)
    connected = threading.Event()
    thread, seen = publish_in_time(battle, left, right, after=connected)
    stream = read_stream(bob, battle, connected=connected)
    thread.join(10)

    assert stream.status == 200
    assert stream.headers["Content-Type"].startswith("text/event-stream")
    assert stream.headers["Cache-Control"] == "no-store"
    kinds = [event for event, _, _ in stream.events]
    assert kinds[-1] == "complete" and set(kinds[:-1]) == {"frame"}
    states = shown_states(stream)
    # Nothing before both sides had a word; then both panes start in the same frame.
    first_at = next(when for event, _, when in stream.events if event == "frame")
    assert first_at >= seen["first-1"]
    assert states[0][0] and states[0][1]
    assert states[0][0].split()[0] == "quick0" and states[0][1] == "steady0"
    # Every state shown is a state of the pacer's timeline, in order (frames due together are sent as
    # the latest), and the last one is both full texts.
    assert _is_ordered_subsequence(states, offline_states(left, right))
    assert states[-1] == (" ".join(FAST), " ".join(SLOW))
    # The longer fast answer was held to the slow side's pace: never more words shown than the slow
    # side had written (extrapolated at its rate once it was done), so the stream outlasted it.
    assert len(states) > 5
    assert stream.events[-1][2] >= seen["done"]
    complete = stream.events[-1][1]
    assert set(complete) == {"a", "b"} and "<p>" in complete["a"]
    battle.refresh_from_db()
    assert battle.status == Battle.Status.READY and battle.shown_at is not None


def test_swapping_the_models_speeds_shows_the_same_timeline(channel_kind: str, acme: Tenant, bob: User) -> None:
    # The slow side sets each stream's length (about 1.1 s). No slow word falls on one of the pacer's
    # 50 ms ticks (43 ms apart): there rounding, not the rule, would decide between two frames.
    fast, slow = (0.05, 0.02), (0.15, 0.043)
    runs = []
    for left_speed, right_speed in ((fast, slow), (slow, fast)):
        battle = live_battle(acme, bob)
        left, right = steady(FAST, *left_speed), steady(SLOW, *right_speed)
        connected = threading.Event()
        thread, _ = publish_in_time(battle, left, right, after=connected)
        stream = read_stream(bob, battle, connected=connected)
        thread.join(10)
        Battle.objects.filter(pk=battle.pk).update(status=Battle.Status.VOID)  # one open battle per rater
        runs.append((stream, offline_states(left, right)))
    (stream_1, timeline_1), (stream_2, timeline_2) = runs
    assert timeline_1 == timeline_2  # the rule: the same frames whichever model is slow
    for stream, timeline in runs:
        assert _is_ordered_subsequence(shown_states(stream), timeline)
        assert shown_states(stream)[-1] == timeline[-1]


def test_a_reader_that_comes_back_later_gets_the_same_texts_at_once(channel_kind: str, acme: Tenant, bob: User) -> None:
    battle = live_battle(acme, bob)
    left, right = steady(FAST[:5], 0.0, 0.01), steady(SLOW[:4], 0.05, 0.01)
    thread, _ = publish_in_time(battle, left, right, record=False)
    thread.join(10)
    time.sleep(0.3)  # well past the paced timeline's end (about 0.15 s), on a loaded machine too
    # Not recorded yet (still "generating"): the reader replays the stored arrivals; they are all in
    # the past, so one reset frame with what the timeline shows by now, both full texts.
    Battle.objects.filter(pk=battle.pk).update(status=Battle.Status.GENERATING)
    channel = live.live_channel()

    def finish() -> None:
        # Recorded once the reader has had its frame from the stored arrivals (while "generating"); had
        # it none by then, the frames asserted below are missing and the test fails there.
        first_frame.wait(20)
        with scopes_disabled():
            recorded = services.battle_generations_record(
                battle=Battle.objects.get(pk=battle.pk),
                left=GenerationResult(" ".join(FAST[:5]), 5, "stop", 0.1),
                right=GenerationResult(" ".join(SLOW[:4]), 4, "stop", 0.1),
            )
        channel.publish(str(battle.pk), live.LiveItem(kind="end", t=10.0, status=recorded.status))
        connections.close_all()

    first_frame = threading.Event()
    finisher = threading.Thread(target=finish, daemon=True)
    finisher.start()
    stream = read_stream(bob, battle, first_event=first_frame)
    finisher.join(10)
    frames = [data for event, data, _ in stream.events if event == "frame"]
    assert frames == [{"a": " ".join(FAST[:5]), "b": " ".join(SLOW[:4]), "reset": True}]
    assert stream.events[-1][0] == "complete"
    # Long after: the battle is recorded, so both rendered answers come at once, without the channel.
    again = read_stream(bob, battle)
    assert [event for event, _, _ in again.events] == ["complete"]


def test_a_voided_battle_ends_the_stream_with_the_reason_only(channel_kind: str, acme: Tenant, bob: User) -> None:
    battle = live_battle(acme, bob)
    channel = live.live_channel()

    def fail() -> None:
        channel.publish(str(battle.pk), live.LiveItem(kind="chunk", t=0.1, side=0, delta="half an answer ", done=False))
        time.sleep(0.2)
        with scopes_disabled():
            recorded = services.battle_generations_record(
                battle=Battle.objects.get(pk=battle.pk),
                left=GenerationResult("half an answer", 3, "stop", 0.2),
                right=GenerationResult(
                    "", 0, "error", 0.3, "model-x at grpc://10.0.0.1: server unreachable", "unreachable"
                ),
            )
        channel.publish(str(battle.pk), live.LiveItem(kind="end", t=0.4, status=recorded.status))
        connections.close_all()

    thread = threading.Thread(target=fail, daemon=True)
    thread.start()
    stream = read_stream(bob, battle)
    thread.join(10)
    assert [event for event, _, _ in stream.events] == ["void"]  # the left side alone was never shown
    assert stream.events[0][1] == {"message": "One of the models could not be reached."}


@in_test_transaction
@pytest.mark.parametrize("who", ["other rater of the organisation", "owner of another organisation", "anonymous"])
def test_only_the_battles_own_rater_can_read_its_stream(
    who: str, acme: Tenant, globex: Tenant, bob: User, charlie: User
) -> None:
    battle = live_battle(acme, bob)
    if who == "anonymous":
        stream = read_stream(None, battle)
        assert stream.status == 302 and "/accounts/login/" in stream.headers["Location"]
        return
    if who == "other rater of the organisation":
        other = UserFactory.create()
        MembershipFactory.create(user=other, organization=acme.organization)
        acme.pool.members.add(other)
    else:
        other = charlie
    stream = read_stream(other, battle)
    assert stream.status == 404 and not stream.events


@in_test_transaction
def test_the_battle_page_streams_a_live_battle_with_the_vote_closed(acme: Tenant, bob: User) -> None:
    from django.test import Client

    battle = live_battle(acme, bob)
    client = Client()
    client.force_login(bob)
    html = client.get(reverse("battles:battle", args=[battle.pk])).content.decode()
    assert f'data-stream="{reverse("battles:stream", args=[battle.pk])}"' in html
    assert html.count(" disabled>") == 4  # the four vote buttons
    assert "arena/stream.js" in html
    battle.refresh_from_db()
    assert battle.shown_at is None  # shown only once both full answers were sent
    vote = client.post(reverse("battles:vote", args=[battle.pk]), {"choice": "left"})
    assert vote.status_code == 409


def _run_task(battle: Battle) -> Callable[[], None]:
    def run() -> None:
        from battles.tasks import battle_generate_live_task

        try:
            battle_generate_live_task.apply(args=(str(battle.pk),), kwargs={"organization_id": battle.organization_id})
        finally:
            connections.close_all()

    return run


@pytest.mark.triton
def test_a_real_task_streams_two_triton_models_and_records_their_timing(
    channel_kind: str, acme: Tenant, bob: User, triton_server: Any
) -> None:
    from tests.conftest import endpoint_for
    from tests.factories import CompetitorFactory

    fast = CompetitorFactory.create(
        campaign=acme.campaign, endpoint=endpoint_for(acme, model="delay-fast", url=triton_server.grpc_url)
    )
    slow = CompetitorFactory.create(
        campaign=acme.campaign, endpoint=endpoint_for(acme, model="delay-slow", url=triton_server.grpc_url)
    )
    acme.left, acme.right = fast, slow
    battle = live_battle(acme, bob)
    worker = threading.Thread(target=_run_task(battle), daemon=True)
    started = time.monotonic()
    worker.start()
    stream = read_stream(bob, battle)
    worker.join(30)
    kinds = [event for event, _, _ in stream.events]
    assert kinds == ["frame", "complete"]  # one chunk a side (today's client): both at once, then the vote
    first = stream.events[0]
    assert first[1]["a"] and first[1]["b"] and first[1]["reset"]
    assert first[2] - started >= 0.3  # not before the slow side (300 ms) had answered
    battle.refresh_from_db()
    assert battle.status == Battle.Status.READY and battle.shown_at is not None
    for generation in Generation.objects.filter(battle=battle):
        # Each answered in one piece: there was no first token to time, so none is stored (not its latency).
        assert generation.ttft_s is None and generation.latency_s >= 0.1
        assert generation.tokens_per_s is not None and generation.tokens_per_s > 0
        assert generation.text in (first[1]["a"], first[1]["b"])


@in_test_transaction
def test_a_reload_after_both_models_finished_keeps_the_pace(channel_kind: str, acme: Tenant, bob: User) -> None:
    """Both models are done and the battle recorded, but the fast model's longer answer is still being
    paced at the slow model's rate: a reload must not show it whole (that would tell which was faster)."""
    from django.test import Client

    battle = live_battle(acme, bob)
    left, right = steady(FAST, 0.0, 0.001), steady(SLOW[:3], 0.0, 0.1)  # paced to its end at 2.3 s
    channel = live.live_channel()
    items = sorted(
        [(t, 0, d, False) for t, d in left.arrivals]
        + [(left.done or 0.0, 0, "", True)]
        + [(t, 1, d, False) for t, d in right.arrivals]
        + [(right.done or 0.0, 1, "", True)],
        key=lambda item: (item[0], item[1], item[3]),
    )
    last = -1.0
    for t, side, delta, done in items:
        last = max(t, last + 1e-6)
        channel.publish(str(battle.pk), live.LiveItem(kind="chunk", t=last, side=side, delta=delta, done=done))
    recorded = services.battle_generations_record(
        battle=battle,
        left=GenerationResult(" ".join(FAST), len(FAST), "stop", 0.03, ttft_s=0.001),
        right=GenerationResult(" ".join(SLOW[:3]), 3, "stop", 0.2, ttft_s=0.001),
    )
    channel.publish(str(battle.pk), live.LiveItem(kind="end", t=last + 1e-3, status=recorded.status))
    channel.close_publisher()
    assert recorded.status == Battle.Status.READY

    client = Client()
    client.force_login(bob)
    page = client.get(reverse("battles:battle", args=[battle.pk])).content.decode()
    assert "data-stream=" in page and " ".join(FAST) not in page
    started = time.monotonic()
    stream = read_stream(bob, battle)
    states = shown_states(stream)
    assert len(states[0][0].split()) < 8  # where the pace is now, not the whole answer
    assert states[-1] == (" ".join(FAST), " ".join(SLOW[:3]))
    assert stream.events[-1][0] == "complete" and stream.events[-1][2] - started >= 1.5


@in_test_transaction
@pytest.mark.tenant_scoped
def test_the_stream_runs_in_the_raters_tenant_scope(acme: Tenant, bob: User) -> None:
    """Without the suite's scopes_disabled(): the async view and its streamed body query the database
    only through the scope the middleware opens (an unscoped query would raise ScopeError)."""
    with scopes_disabled():
        battle = live_battle(acme, bob)
        channel = live.live_channel()
        for t, side, delta, done in ((0.1, 0, "left answer", True), (0.2, 1, "right answer", True)):
            channel.publish(str(battle.pk), live.LiveItem(kind="chunk", t=t, side=side, delta=delta, done=done))
        services.battle_generations_record(
            battle=battle,
            left=GenerationResult("left answer", 2, "stop", 0.1, ttft_s=0.1),
            right=GenerationResult("right answer", 2, "stop", 0.2, ttft_s=0.2),
        )
        channel.publish(str(battle.pk), live.LiveItem(kind="end", t=0.3, status="ready"))
        channel.close_publisher()
    stream = read_stream(bob, battle)
    assert [event for event, _, _ in stream.events] == ["frame", "complete"]
    assert stream.events[0][1] == {"a": "left answer", "b": "right answer", "reset": True}
    with scopes_disabled():
        assert Battle.objects.get(pk=battle.pk).shown_at is not None


@pytest.mark.triton
def test_two_streaming_models_are_shown_at_one_pace(
    channel_kind: str, acme: Tenant, bob: User, triton_server: Any
) -> None:
    """The real path with decoupled models over the gRPC stream (the vLLM stand-ins: one starts at
    150 ms and writes a word every 30 ms, the other starts at 400 ms and writes one every 10 ms): the
    panes start together and always show the same number of words, until the shorter answer ends."""
    from tests.factories import CompetitorFactory, ModelEndpointFactory

    competitors = [
        CompetitorFactory.create(
            campaign=acme.campaign,
            endpoint=ModelEndpointFactory.create(
                organization=acme.organization, model_name=model, url=triton_server.grpc_url, contract="vllm"
            ),
        )
        for model in ("vllm-standin", "vllm-standin-slow")
    ]
    acme.left, acme.right = competitors
    battle = live_battle(acme, bob)
    worker = threading.Thread(target=_run_task(battle), daemon=True)
    worker.start()
    stream = read_stream(bob, battle, timeout_s=60)
    worker.join(60)
    battle.refresh_from_db()
    assert battle.status == Battle.Status.READY, battle.void_reason
    texts = {g.side: g.text for g in Generation.objects.filter(battle=battle)}
    full = (texts["left"], texts["right"])
    states = shown_states(stream)
    assert stream.events[-1][0] == "complete" and len(states) >= 3, states
    assert states[0][0] and states[0][1]  # both panes start in the same frame
    for shown_a, shown_b in states:
        assert full[0].startswith(shown_a) and full[1].startswith(shown_b)
        words = (len(shown_a.split()), len(shown_b.split()))
        complete = (words[0] == len(full[0].split()), words[1] == len(full[1].split()))
        assert words[0] == words[1] or complete[0] or complete[1], (words, complete)
    assert states[-1] == full
    for generation in Generation.objects.filter(battle=battle):
        assert generation.ttft_s is not None and 0 < generation.ttft_s < generation.latency_s


@pytest.mark.triton
def test_a_pool_battle_with_nothing_ready_is_streamed_live_not_prepared_behind_a_polling_page(
    acme: Tenant, bob: User, triton_server: Any, settings: Any
) -> None:
    """The buffer has nothing for the rater: the battle prepared for them (a pool prompt) is generated by
    the live task and streamed at the common pace, both panes from one frame, instead of a "preparing"
    page for the whole generation (issue 22.4)."""
    from django.test import Client

    from battles.models import Campaign, Competitor
    from tests.factories import CompetitorFactory, ModelEndpointFactory

    settings.ARENA_LIVE_STREAMING = True
    settings.REDIS_URL = None  # the in-process channel (the demo's)
    Competitor.objects.filter(campaign=acme.campaign).update(active=False)
    for model in ("vllm-standin", "vllm-standin-slow"):
        CompetitorFactory.create(
            campaign=acme.campaign,
            endpoint=ModelEndpointFactory.create(
                organization=acme.organization, model_name=model, url=triton_server.grpc_url, contract="vllm"
            ),
        )
    Campaign.objects.filter(pk=acme.campaign.pk).update(buffer_size=0)  # nothing is ever ready ahead
    client = Client()
    client.force_login(bob)
    response = client.post(reverse("battles:next", args=[acme.campaign.pk]))
    battle = Battle.objects.get(rater=bob)
    assert response["Location"] == reverse("battles:battle", args=[battle.pk])
    assert battle.live and battle.prompt.source == "pool" and battle.status == Battle.Status.GENERATING
    page = client.get(response["Location"]).content.decode()
    assert "Preparing your next battle" not in page
    assert f'data-stream="{reverse("battles:stream", args=[battle.pk])}"' in page and page.count(" disabled>") == 4

    worker = threading.Thread(target=_run_task(battle), daemon=True)
    worker.start()
    stream = read_stream(bob, battle, timeout_s=60)
    worker.join(60)
    battle.refresh_from_db()
    assert battle.status == Battle.Status.READY, battle.void_reason
    states = shown_states(stream)
    assert stream.events[-1][0] == "complete" and len(states) >= 3, states
    assert states[0][0] and states[0][1]  # both panes start in the same frame
    texts = {g.side: g.text for g in Generation.objects.filter(battle=battle)}
    assert states[-1] == (texts["left"], texts["right"])
    assert battle.shown_at is not None  # the vote opens at the end, as for a typed prompt
