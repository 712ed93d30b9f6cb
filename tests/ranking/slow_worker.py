"""A Celery worker whose recomputes never finish: the test kills it mid-recompute.

Run as ``python -m tests.ranking.slow_worker <celery worker arguments>``. The real task starts (clears the
pending mark, takes the running lease, logs "recompute started"); only the computation is replaced by
a wait, standing for a long recompute of a big campaign."""

from __future__ import annotations

import sys
import time


def main() -> None:
    import django

    django.setup()
    from ranking.services import recompute

    def never_done(*, campaign_id: int) -> list[object]:
        while True:
            time.sleep(1)

    recompute.leaderboards_recompute = never_done  # type: ignore[assignment]
    from arena.celery import app

    app.worker_main(["worker", *sys.argv[1:]])


if __name__ == "__main__":
    main()
