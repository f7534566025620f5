from django.apps import AppConfig


class MetricsConfig(AppConfig):
    """Prometheus' /metrics (read with a scrape token), the tokens' page, and the agent's
    reading of the ruleset's counters per traffic class (docs/METRICS.md)."""

    name = "metrics"
    verbose_name = "Metrics"
