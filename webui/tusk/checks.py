"""Django system checks of Tusk's own conventions (STYLE.md, from NetBox): every model of
Tusk's apps says what it is (a docstring of its own), how it reads in a list or a log
(__str__) and in which order its rows come (Meta.ordering). `manage.py check` reports a
model without one, and tests/unit/test_django_project.py fails on it."""
from django.apps import apps
from django.core import checks
from django.db import models

TUSK_MODULE_PREFIXES = ("accounts", "backup", "dashboard", "diag", "flows", "ha", "jobs",
                        "logs", "metrics", "network", "policy", "selftest", "snmp", "system",
                        "tuning")


@checks.register(checks.Tags.models)
def models_say_what_they_are(app_configs=None, **kwargs):
    found = []
    configs = app_configs or apps.get_app_configs()
    for config in configs:
        if config.name.split(".")[0] not in TUSK_MODULE_PREFIXES:
            continue
        for model in config.get_models():
            name = f"{model._meta.label}"
            # Django writes "Model(id, field, ...)" where the class has no docstring
            doc = model.__doc__ or ""
            if not doc.strip() or doc.startswith(f"{model.__name__}("):
                found.append(checks.Warning(f"{name} has no docstring", obj=model,
                                            id="tusk.W001"))
            if model.__str__ is models.Model.__str__:
                found.append(checks.Warning(f"{name} has no __str__", obj=model,
                                            id="tusk.W002"))
            if not model._meta.ordering:
                found.append(checks.Warning(f"{name} has no Meta.ordering", obj=model,
                                            id="tusk.W003"))
    return found
