"""Settings name tasks by string (CELERY_TASK_ROUTES, CELERY_BEAT_SCHEDULE), as do messages in flight across
a deploy: every such name must be a task the worker registers. A task moved to another module keeps its
name (``@shared_task(name="<app>.tasks.<function>")``), and ``<app>.tasks`` re-exports it."""

from __future__ import annotations

from django.conf import settings

from arena.celery import app


def _registered() -> set[str]:
    app.loader.import_default_modules()  # the worker's autodiscovery: every app's tasks module
    return set(app.tasks.keys())


def test_every_routed_task_is_registered() -> None:
    registered = _registered()
    assert set(settings.CELERY_TASK_ROUTES) - registered == set()


def test_every_scheduled_task_is_registered() -> None:
    registered = _registered()
    scheduled = {entry["task"] for entry in settings.CELERY_BEAT_SCHEDULE.values()}
    assert scheduled - registered == set()


def test_the_battles_tasks_keep_their_names_and_their_face() -> None:
    import battles.tasks

    registered = _registered()
    for name in battles.tasks.__all__:
        task = getattr(battles.tasks, name)
        assert task.name == f"battles.tasks.{name}"
        assert task.name in registered
