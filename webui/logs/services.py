"""The Logs page's query, called by the page and every other front end alike: the
records that match the page's filters (logs/forms.py FilterForm: the same fields, the
same checks), newest first, at most a limit of them, scanning at most SCAN_BYTES of the
log back from its end (core/storage.py)."""
import dataclasses
import functools
from dataclasses import dataclass

from django.conf import settings

from policy.core.errors import PolicyError
from policy.core.normalise import load_policy_text
from policy.models import Revision, TargetState

from .core import paths, records, storage
from .core.constants import SCAN_BYTES, TAIL_DEFAULT
from .forms import FilterForm


@functools.lru_cache(maxsize=8)
def _policy_of(number, ruleset_sha256):
    """(zones {name: frozenset of interfaces}, class names) of revision number (with
    that ruleset: a revision never changes, so the parse is kept; the hash tells a
    revision of another database - a restore, the tests - from it)."""
    text = Revision.objects.filter(number=number).values_list("policy_text", flat=True).first()
    try:
        policy = load_policy_text(text) if text else None
    except PolicyError:   # a revision of an older Tusk that this one no longer reads
        policy = None
    if policy is None:
        return {}, ()
    return ({zone.name: frozenset(zone.interfaces) for zone in policy.zones},
            tuple(c.name for c in policy.classes))


def confirmed():
    """(revision number or None, zones, class names) of the confirmed policy."""
    number = TargetState.objects.filter(pk=1).values_list("confirmed", flat=True).first()
    found = Revision.objects.filter(number=number).values_list("ruleset_sha256", flat=True)
    sha256 = found.first() if number else None
    return (number, *_policy_of(number, sha256)) if sha256 else (None, {}, ())


@dataclass(frozen=True)
class Found:
    form: FilterForm
    search: storage.Search | None     # None: the filters were refused (form.errors)
    error: str                        # the log could not be read safely


def search(data, zones, classes, before=None):
    """data: the filters as the page's GET has them ({} : none). zones, classes: the
    confirmed policy's (confirmed()). before: only records older than this Unix time
    (the API's pages: the form's times are whole seconds)."""
    form = FilterForm(data or None, zones=zones, classes=classes, initial={"live": True})
    if data and not form.is_valid():
        return Found(form, None, "")
    match = form.filter() if data else records.Filter()
    if before is not None:
        until = before - 1e-6 if match.until is None else min(match.until, before - 1e-6)
        match = dataclasses.replace(match, until=until)
    try:
        found = storage.search(paths.log_dir(settings.TUSK), records.parse, match.matches,
                               form.tail if form.is_bound else TAIL_DEFAULT, SCAN_BYTES,
                               since=match.since, candidate=match.candidate())
    except storage.UnsafeFile as exc:
        return Found(form, None, str(exc))
    return Found(form, found, "")
