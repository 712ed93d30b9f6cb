"""The live channel of a streamed battle: the generation worker publishes raw arrivals, the web reads
them (async) and paces them (battles/pacing.py) for the page.

Items are published in time order on one clock (the publisher's, seconds since both requests left),
each with a strictly larger ``t`` than the one before: an item at ``t`` tells the reader that nothing
at or before ``t`` is still to come, so its pacer never has to guess. While the models write, the
publisher adds a *mark* (an item with no text) whenever nothing was published for ``MARK_PERIOD_S``, so
the reader's horizon advances between chunks. The stored ``t`` values make a replay deterministic: a
reader that starts again from the first item (a reload, a reconnect) computes the same frames, and
shows at once what was shown already (a battle completed long ago: both full texts).

Two channels behind one interface: Redis Streams (``XADD``/``XREAD BLOCK``, one key per battle with a
TTL and a length cap) when ``REDIS_URL`` is set, for web and workers on several machines; otherwise one
in this process (the demo: the web server and its in-process generation worker share it).
"""

from __future__ import annotations

import asyncio
import math
import threading
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from typing import Any, Protocol

from django.conf import settings

from .pacing import DEFAULT_PERIOD, OnlinePacer

__all__ = [
    "Complete",
    "Heartbeat",
    "LiveChannel",
    "LiveItem",
    "LivePublisher",
    "MemoryChannel",
    "Paced",
    "RedisChannel",
    "Void",
    "live_channel",
    "live_frames",
]

MARK_PERIOD_S = 0.025
LIVE_TTL_S = 3600  # a battle's items live this long after its last item (reloads, late readers)
LIVE_MAXLEN = 200_000  # items per battle at most (tokens and marks of a very long answer)


@dataclass(frozen=True)
class LiveItem:
    kind: str  # "chunk" | "mark" | "end"
    t: float  # the publisher's clock
    side: int = -1
    delta: str = ""
    done: bool = False
    status: str = ""  # end: "ready" | "void"
    published_at: float = 0.0  # the channel's clock (seconds), set when stored

    def fields(self) -> dict[str, str]:
        return {
            "k": self.kind,
            "t": repr(self.t),
            "s": str(self.side),
            "d": self.delta,
            "f": "1" if self.done else "0",
            "st": self.status,
        }

    @classmethod
    def from_fields(cls, fields: dict[str, str], published_at: float) -> LiveItem:
        return cls(
            kind=fields["k"],
            t=float(fields["t"]),
            side=int(fields["s"]),
            delta=fields.get("d", ""),
            done=fields.get("f") == "1",
            status=fields.get("st", ""),
            published_at=published_at,
        )


class LiveChannel(Protocol):
    def publish(self, battle_id: str, item: LiveItem) -> None: ...

    async def read(self, battle_id: str, after: str, block_s: float) -> list[tuple[str, LiveItem]]:
        """Items after the id ``after`` ("0": from the first), waiting up to ``block_s`` for one."""
        ...

    async def clock(self) -> float:
        """The channel's clock now (the clock of ``LiveItem.published_at``)."""
        ...

    def close_publisher(self) -> None: ...


class RedisChannel:
    """Redis Streams: one stream per battle, ``arena:live:<battle id>``."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._sync: Any = None
        self._async: Any = None
        self._clock_offset: float | None = None

    @staticmethod
    def key(battle_id: str) -> str:
        return f"arena:live:{battle_id}"

    def publish(self, battle_id: str, item: LiveItem) -> None:
        import redis

        if self._sync is None:
            self._sync = redis.Redis.from_url(self.url, socket_timeout=5, socket_connect_timeout=5)
        pipe = self._sync.pipeline(transaction=False)
        pipe.xadd(self.key(battle_id), item.fields(), maxlen=LIVE_MAXLEN, approximate=True)
        pipe.expire(self.key(battle_id), LIVE_TTL_S)
        pipe.execute()

    def close_publisher(self) -> None:
        if self._sync is not None:
            self._sync.close()
            self._sync = None

    async def _client(self) -> Any:
        import redis.asyncio

        if self._async is None:
            self._async = redis.asyncio.Redis.from_url(self.url, decode_responses=True, socket_connect_timeout=5)
        return self._async

    async def read(self, battle_id: str, after: str, block_s: float) -> list[tuple[str, LiveItem]]:
        client = await self._client()
        answer = await client.xread({self.key(battle_id): after}, block=max(1, int(block_s * 1000)), count=5000)
        items: list[tuple[str, LiveItem]] = []
        for _key, entries in answer or []:
            for entry_id, fields in entries:
                published_at = int(entry_id.split("-", 1)[0]) / 1000  # Redis stamps the id with its clock
                items.append((entry_id, LiveItem.from_fields(fields, published_at)))
        return items

    async def clock(self) -> float:
        if self._clock_offset is None:
            client = await self._client()
            seconds, micros = await client.time()
            self._clock_offset = seconds + micros / 1e6 - time.monotonic()
        return time.monotonic() + self._clock_offset

    async def aclose(self) -> None:
        if self._async is not None:
            await self._async.aclose()
            self._async = None


class MemoryChannel:
    """In this process (threads publish, event loops read): the demo without Redis."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._items: dict[str, list[LiveItem]] = {}
        self._touched: dict[str, float] = {}
        self._waiters: dict[str, list[tuple[asyncio.AbstractEventLoop, asyncio.Event]]] = {}

    def publish(self, battle_id: str, item: LiveItem) -> None:
        now = time.time()
        stored = replace(item, published_at=now)
        with self._lock:
            for stale in [b for b, at in self._touched.items() if now - at > LIVE_TTL_S]:
                self._items.pop(stale, None)
                self._touched.pop(stale, None)
            self._items.setdefault(battle_id, []).append(stored)
            self._touched[battle_id] = now
            waiters = self._waiters.pop(battle_id, [])
        for loop, event in waiters:
            try:
                loop.call_soon_threadsafe(event.set)
            except RuntimeError:  # that reader's loop is gone
                pass

    def close_publisher(self) -> None:
        pass

    def _after(self, battle_id: str, after: str) -> list[tuple[str, LiveItem]]:
        start = int(after)
        items = self._items.get(battle_id, [])
        return [(str(index + 1), item) for index, item in enumerate(items[start:], start)]

    async def read(self, battle_id: str, after: str, block_s: float) -> list[tuple[str, LiveItem]]:
        event = asyncio.Event()
        with self._lock:
            found = self._after(battle_id, after)
            if found:
                return found
            self._waiters.setdefault(battle_id, []).append((asyncio.get_running_loop(), event))
        try:
            await asyncio.wait_for(event.wait(), timeout=block_s)
        except TimeoutError:
            pass
        with self._lock:
            waiters = self._waiters.get(battle_id, [])
            if (asyncio.get_running_loop(), event) in waiters:
                waiters.remove((asyncio.get_running_loop(), event))
            return self._after(battle_id, after)

    async def clock(self) -> float:
        return time.time()

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._touched.clear()


_memory = MemoryChannel()


def live_channel() -> LiveChannel:
    """The platform's channel: Redis when ``REDIS_URL`` is set, else this process's."""
    if settings.REDIS_URL:
        return RedisChannel(settings.REDIS_URL)
    return _memory


class LivePublisher:
    """The worker's side: ``chunk`` per arrival (thread-safe: both sides call it), ``end`` after the
    battle is recorded. Marks are published from a background thread between chunks."""

    def __init__(
        self, battle_id: str, channel: LiveChannel | None = None, mark_period_s: float = MARK_PERIOD_S
    ) -> None:
        self.battle_id = battle_id
        self.channel = channel or live_channel()
        self._lock = threading.Lock()
        self._origin = time.monotonic()
        self._last_t = -math.inf
        self._last_publish = time.monotonic()
        self._mark_period_s = mark_period_s
        self._stop = threading.Event()
        self._marks = threading.Thread(target=self._mark_loop, name=f"arena-live-marks-{battle_id}", daemon=True)
        self._marks.start()

    def _publish(self, kind: str, **fields: Any) -> None:
        with self._lock:
            # One clock, strictly increasing: an item at t means nothing at or before t is still to come.
            t = max(time.monotonic() - self._origin, self._last_t + 1e-6)
            self._last_t = t
            self.channel.publish(self.battle_id, LiveItem(kind=kind, t=t, **fields))
            self._last_publish = time.monotonic()

    def _mark_loop(self) -> None:
        while not self._stop.wait(self._mark_period_s / 2):
            if time.monotonic() - self._last_publish >= self._mark_period_s:
                try:
                    self._publish("mark")
                except Exception:  # a lost mark only delays the reader until the next item
                    pass

    def chunk(self, side: int, delta: str, done: bool) -> None:
        self._publish("chunk", side=side, delta=delta, done=done)

    def end(self, status: str) -> None:
        self._stop.set()
        self._publish("end", status=status)

    def close(self) -> None:
        self._stop.set()
        self._marks.join(timeout=1)
        self.channel.close_publisher()


# --- The reader: what the SSE view sends ------------------------------------------------------------


@dataclass(frozen=True)
class Paced:
    """Text to append to each pane (``reset``: replace the pane's text instead)."""

    a: str
    b: str
    reset: bool


@dataclass(frozen=True)
class Complete:
    """Both sides complete and fully shown, and the battle recorded as ready."""


@dataclass(frozen=True)
class Void:
    """The battle was voided (a side failed)."""


@dataclass(frozen=True)
class Heartbeat:
    """Nothing new for a while; ``seen`` says whether any item came at all."""

    seen: bool


LiveOutput = Paced | Complete | Void | Heartbeat


async def live_frames(
    battle_id: str,
    channel: LiveChannel,
    *,
    period: float = DEFAULT_PERIOD,
    heartbeat_s: float = 15.0,
    recorded: bool = False,
) -> AsyncIterator[LiveOutput]:
    """Read the battle's channel from its first item and yield what the panes show, paced.

    Frames that fall due together (a backlog read at once after a reload) are sent as one: the latest.
    Each connection starts with a reset frame holding everything shown so far. ``recorded``: the battle
    is recorded already; if its channel holds nothing (expired, or another process's), it is complete
    at once (the page then gets the recorded texts)."""
    pacer = OnlinePacer(period)
    after = "0"
    last: LiveItem | None = None
    end_status = ""
    sent = ["", ""]
    reset = True
    idle_since = time.monotonic()
    while True:
        wait = heartbeat_s - (time.monotonic() - idle_since)
        due = pacer.next_time
        if pacer.all_done and last is not None and due is not None:
            # Both texts are in: the rest is paced on the clock, woken for each tick.
            wait = min(wait, due - (last.t + (await channel.clock() - last.published_at)))
        if recorded and last is None:
            wait = min(wait, 0.2)
        items = await channel.read(battle_id, after, max(wait, 0.001))
        if recorded and last is None and not items:
            yield Complete()
            return
        for entry_id, item in items:
            after = entry_id
            last = item
            if item.kind == "chunk":
                try:
                    pacer.feed(item.side, item.t, item.delta, item.done)
                except ValueError:  # text after a side's end: never shown (the recorded text is final)
                    pass
            elif item.kind == "end":
                end_status = item.status
        if items:
            idle_since = time.monotonic()
        if end_status == "void":
            yield Void()
            return
        if last is None:
            if time.monotonic() - idle_since >= heartbeat_s:
                idle_since = time.monotonic()
                yield Heartbeat(seen=False)
            continue
        horizon = last.t
        if pacer.all_done:
            horizon = max(horizon, last.t + (await channel.clock() - last.published_at))
        frames = pacer.advance(horizon)
        if frames:
            frame = frames[-1]
            texts = [pacer.text(0, frame.units[0]), pacer.text(1, frame.units[1])]
            if reset:
                yield Paced(texts[0], texts[1], reset=True)
                reset = False
            else:
                yield Paced(texts[0][len(sent[0]) :], texts[1][len(sent[1]) :], reset=False)
            sent = texts
        if end_status == "ready" and (pacer.finished or not pacer.all_done):
            # Not all_done: the channel lost items (the worker's Redis connection broke mid-battle);
            # the battle is recorded, so the page gets the full texts from the database.
            yield Complete()
            return
        if not items and not frames and time.monotonic() - idle_since >= heartbeat_s:
            idle_since = time.monotonic()
            yield Heartbeat(seen=True)
