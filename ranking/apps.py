from django.apps import AppConfig


class RankingConfig(AppConfig):
    name = "ranking"
    verbose_name = "Rankings"

    def ready(self) -> None:
        # The apps below ranking announce what happened (votes, flags, settings); ranking subscribes.
        from . import receivers

        receivers.connect()
