"""The policy's part of the box's snapshot (box/snapshot.py): the policy the box runs
(pending, else confirmed) and the one it runs next - in the web process the live revision
and the draft, in the agent the revisions of the policy's own store (root's). Each is a
parsed policy document, so a revision of an older release still names its zones."""
from box import snapshot

from . import draft as drafts
from .core.errors import PolicyError
from .core.normalise import parse_yaml
from .core.revisions import Store
from .models import TargetState
from .selectors import live_revision


def _parsed(text, which):
    try:
        return parse_yaml(text) or {}
    except PolicyError as error:
        raise snapshot.SnapshotError(f"the {which} policy cannot be read: {error}") from None


@snapshot.reader("policy", snapshot.WEB)
def drafted(**_):
    """The live revision (the pending one, else the confirmed one), then the draft."""
    found = []
    state = TargetState.objects.filter(pk=1).first()
    live = live_revision(fields=("number", "policy_text"), state=state)
    if live is not None:
        which = snapshot.PENDING if state.pending else snapshot.CONFIRMED
        found.append((which, _parsed(live.policy_text, which)))
    found.append((snapshot.DRAFT, drafts.current()[1]))
    return found


@snapshot.reader("policy", snapshot.AGENT)
def stored(config, **_):
    """The confirmed and the pending revision of the store."""
    store = Store(config.state_dir)
    pending = store.pending()
    found = []
    for which, number in ((snapshot.CONFIRMED, store.confirmed_id()),
                          (snapshot.PENDING, pending["revision"] if pending else None)):
        if number is not None:
            try:
                text = store.get(number).policy_text
            except PolicyError as error:
                raise snapshot.SnapshotError(f"the policy's revision {number} cannot be "
                                             f"read: {error}") from None
            found.append((which, _parsed(text, which)))
    return found
