"""A commit-confirm domain as a declaration: its name (job kinds `<name>.confirm`, URL
names `<name>_history`, ...), its words, its models and the pages around the generic
views. Each domain declares one in its app's domain.py and registers it."""
from dataclasses import dataclass
from typing import Any

from django.utils.module_loading import import_string

_DOMAINS = {}


@dataclass(frozen=True)
class Domain:
    name: str                       # "policy": jobs policy.confirm, URLs policy_history
    label: str                      # "policy", "network configuration", "HA pair configuration"
    revision_model: Any             # a RevisionBase
    state_model: Any                # a StateBase
    status_url: str                 # where a decision's job page goes back to
    diff_field: str                 # what a revision's page compares with the one before
    revision_template: str
    # the header above the history table (the domain's own navigation or badge)
    header_template: str
    heavy_fields: tuple[str, ...] = ()      # not read for the history table
    rollback: bool = False                  # "roll back to this revision" exists
    # the function giving the context every page of the domain shows (its status
    # panel's), as a dotted path: the domain's views import the declaration
    context: str = ""
    # text -> text as a page shows a revision's diff_field (secrets hidden), dotted path
    shown: str = ""

    def kind(self, decision):
        return f"{self.name}.{decision}"

    def url(self, view):
        return f"{self.name}_{view}"

    def page_context(self):
        return import_string(self.context)() if self.context else {}

    def show(self, text):
        return import_string(self.shown)(text) if self.shown and text else text


def register(domain):
    if domain.name in _DOMAINS and _DOMAINS[domain.name] is not domain:
        raise ValueError(f"commit-confirm domain {domain.name!r} declared twice")
    _DOMAINS[domain.name] = domain
    return domain


def get(name):
    return _DOMAINS[name]


def all_domains():
    return dict(_DOMAINS)
