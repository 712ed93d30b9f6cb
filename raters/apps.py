from django.apps import AppConfig


class RatersConfig(AppConfig):
    name = "raters"
    verbose_name = "Organisations and raters"
