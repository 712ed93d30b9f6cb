"""The stack the fault tests share (tests/reliability/stack.py): started once for the module that asks for
it, its own PostgreSQL, Redis and Triton, so the tests may stop and restart them without touching the
machine's shared servers."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from .stack import Stack


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    with tempfile.TemporaryDirectory(prefix="arena-stack-") as folder:
        running = Stack(Path(folder), web_workers=2, worker_concurrency=4, raters=4)
        try:
            running.start()
            yield running
        except BaseException:
            print(running.logs())
            raise
        finally:
            running.stop()
