"""A connection's class by name: its ct mark carries the 1-based ordinal of the class that
accepted it, named from the revision loaded now. The Flows page and /metrics use it."""
from policy.core.errors import PolicyError
from policy.core.normalise import parse_yaml
from policy.models import Revision, TargetState

_class_names = {}      # (revision number, ruleset hash) -> {ordinal: class name}


def class_names():
    """{ordinal: class name} of the revision loaded now (the pending one while an apply
    waits for confirmation, the confirmed one otherwise): a connection's ct mark carries
    the 1-based ordinal of the class that accepted it."""
    state = TargetState.objects.filter(pk=1).first()
    number = state and (state.pending or state.confirmed)
    revision = Revision.objects.filter(number=number).only(
        "number", "ruleset_sha256", "policy_text").first() if number else None
    if revision is None:
        return {}
    key = (revision.number, revision.ruleset_sha256)
    if key not in _class_names:
        try:
            document = parse_yaml(revision.policy_text)
        except PolicyError:
            document = None
        classes = document.get("classes") if isinstance(document, dict) else None
        _class_names.clear()
        _class_names[key] = {index: str(item.get("name", "")) for index, item
                             in enumerate(classes if isinstance(classes, list) else [], 1)
                             if isinstance(item, dict)}
    return _class_names[key]
