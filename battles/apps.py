from django.apps import AppConfig

from raters import hooks as raters_hooks
from serving import hooks as serving_hooks


class BattlesConfig(AppConfig):
    name = "battles"
    verbose_name = "Campaigns and battles"

    def ready(self) -> None:
        from . import receivers, selectors, services  # models are loaded only now

        # Whether an endpoint served battles is this app's knowledge; serving asks through its hook.
        serving_hooks.endpoint_usage_register(services.endpoint_has_battles)
        # Which endpoints the health check watches: those of open campaigns' active competitors.
        serving_hooks.endpoint_watch_register(selectors.endpoints_watched)
        # An export's file goes with its job's row, however the row goes (cascades included).
        receivers.connect()
        # A rater's every request asks whether the account has a study participation (the study gate): that
        # fact comes in the round trip that reads the session's user.
        raters_hooks.user_fact_register(selectors.participant_key)
