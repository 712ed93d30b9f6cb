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


def test_every_queue_has_its_own_worker_service_in_compose_and_no_task_is_left_on_the_default() -> None:
    """docker/compose.yaml runs one worker per kind of work (core/queues.py): every queue a task is routed
    to is consumed, by one service, and no tenant-facing work (a model call, a webhook, an export, a
    recompute) falls back to the default queue of beat's sweeps."""
    from pathlib import Path

    import yaml

    from core import queues

    compose = yaml.safe_load((Path(settings.BASE_DIR) / "docker" / "compose.yaml").read_text())
    consumed: dict[str, str] = {}
    for name, service in compose["services"].items():
        command = service.get("command") or []
        if command[:4] == ["celery", "-A", "arena", "worker"]:
            for queue in command[command.index("-Q") + 1].split(","):
                assert queue not in consumed, f"{queue} consumed by {consumed[queue]} and {name}"
                consumed[queue] = name
    assert set(consumed) == set(queues.ALL)
    routed = {route["queue"] for route in settings.CELERY_TASK_ROUTES.values()}
    assert routed == set(queues.ALL) - {queues.DEFAULT}
    default = _registered() - set(settings.CELERY_TASK_ROUTES)
    for name in default:
        assert not name.endswith(
            ("_recompute_task", "_generate_task", "_generate_live_task", "_deliver_task", "_run_task")
        ), f"{name} runs on the default queue"
