from django.apps import AppConfig


class RatersConfig(AppConfig):
    name = "raters"
    verbose_name = "Organisations and raters"

    def ready(self) -> None:
        from . import principals, signals  # noqa: F401 - connect the receivers
