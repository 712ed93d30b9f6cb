"""Fair dual streaming benchmark: how soon both panes start, and how long a streamed battle takes.

    python benchmarks/streaming.py [--runs 5] [--redis redis://127.0.0.1:6379/15]

Two simulated models stream words into a battle's live channel through the worker's publisher
(battles/live.py: strictly increasing times, marks between chunks) while the web side's reader paces
them (battles/pacing.py) exactly as the SSE view does; no Django, no model server. The slow model starts
at 500 ms and writes a word every 30 ms, the fast one starts at 100 ms with a word every 10 ms. Two cases:
the slower model's answer is the longer one (40 words against 20), and the faster model's (60 against
40: its tail is paced at the slow rate, the price of fairness). Prints, per case, the median and worst
of: the delay from the slower side's first word to the first frame (both panes; the targets are 50 ms
between the panes, which share one frame, and 100 ms after the slower side's first token), and the
battle's total time over the slower side's generation time (target <= 1.05, which the second case
misses by design, at about n_fast / n_slow). With ``--redis`` the channel is Redis Streams, else the
in-process one. Exits 1 if the first case misses a target.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

from battles.live import Complete, LiveChannel, LivePublisher, MemoryChannel, Paced, RedisChannel, live_frames  # noqa: E402

FAST = (0.10, 0.010)
SLOW = (0.50, 0.030)


def one_run(channel: LiveChannel, battle_id: str, fast_words: int, slow_words: int) -> tuple[float, float]:
    marks: dict[str, float] = {}

    def publish() -> None:
        publisher = LivePublisher(battle_id, channel)
        events = []
        for side, (n, (first, gap)) in enumerate(((fast_words, FAST), (slow_words, SLOW))):
            events += [(first + i * gap, side, f"w{i}" + ("" if i == n - 1 else " "), i == n - 1) for i in range(n)]
        events.sort()
        origin = marks["origin"] = time.monotonic()
        for t, side, delta, done in events:
            time.sleep(max(0.0, t - (time.monotonic() - origin)))
            if side == 1:
                marks.setdefault("slow_first", time.monotonic())
            publisher.chunk(side, delta, done)
            if side == 1 and done:
                marks["slow_done"] = time.monotonic()
        publisher.end("ready")
        publisher.close()

    async def read() -> dict[str, float]:
        seen: dict[str, float] = {}
        async for output in live_frames(battle_id, channel):
            if isinstance(output, Paced):
                seen.setdefault("first", time.monotonic())
            elif isinstance(output, Complete):
                seen["complete"] = time.monotonic()
                break
        close = getattr(channel, "aclose", None)
        if close is not None:
            await close()
        return seen

    thread = threading.Thread(target=publish)
    thread.start()
    seen = asyncio.run(read())
    thread.join()
    slow_generation = marks["slow_done"] - marks["origin"]
    return (seen["first"] - marks["slow_first"]) * 1000, (seen["complete"] - marks["origin"]) / slow_generation


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--redis", default="", help="a Redis URL: use Redis Streams as the channel")
    args = parser.parse_args()
    ok = True
    for label, fast_words, slow_words, checked in (
        ("slower model's answer longer (20 vs 40 words)", 20, 40, True),
        ("faster model's answer longer (60 vs 40 words)", 60, 40, False),
    ):
        results = []
        for run in range(args.runs):
            channel: LiveChannel = RedisChannel(args.redis) if args.redis else MemoryChannel()
            results.append(one_run(channel, f"bench-{time.time_ns()}-{run}", fast_words, slow_words))
        first = [r[0] for r in results]
        ratio = [r[1] for r in results]
        print(
            f"{label}: first frame {statistics.median(first):.1f} ms after the slower side's first word "
            f"(worst {max(first):.1f}; both panes in that one frame); total / slower side's generation time "
            f"{statistics.median(ratio):.3f} (worst {max(ratio):.3f})"
        )
        if checked and (statistics.median(first) > 100 or statistics.median(ratio) > 1.05):
            ok = False
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
