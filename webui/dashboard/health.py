"""The health panel's checks, registered by each app as its agent tasks are: a function
that returns a list of checks ({"name", "ok", "detail"}; ok None: not known yet), run in
the order the apps register them (INSTALLED_APPS' order; the dashboard's own first). An
app registers in its AppConfig.ready(); the dashboard imports no app for its panel."""

AGENT_STALE = 15     # seconds without a report: the agent counts as not reporting

_CHECKS = []


def check(name, ok, detail):
    return {"name": name, "ok": ok, "detail": detail}


def register(function):
    """Adds function (-> [check]) to the panel, once."""
    if function not in _CHECKS:
        _CHECKS.append(function)
    return function


def run():
    """Every registered check, in order: polling this creates nothing."""
    return [found for function in _CHECKS for found in function()]
