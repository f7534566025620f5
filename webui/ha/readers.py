"""HA's part of the box's snapshot (box/snapshot.py): this box's half of the pair,
confirmed and awaiting confirmation - in the web process as the agent last mirrored them
(HaState), in the agent from HA's own files and store (root's; never the mirror). Each
is an ha.core HaConfig; a box alone (or a pair disabled) has none. In the web process one
that cannot be read is left out (the agent reads the files again before it applies
anything); in the agent it is an error."""
from box import snapshot
from box.appliers import HaApplier

from .core.config import HaError, parse
from .models import HaState


@snapshot.reader("ha", snapshot.WEB)
def mirrored(**_):
    state = HaState.current()
    if state is None:
        return []
    found = []
    for which, text in ((snapshot.CONFIRMED, state.confirmed_text),
                        (snapshot.PENDING, state.pending_text if state.pending else "")):
        if not text:
            continue
        try:
            found.append((which, parse(text)))
        except HaError:
            continue
    return [(which, ha) for which, ha in found if ha.enabled]


@snapshot.reader("ha", snapshot.AGENT)
def stored(config, **_):
    applier = HaApplier(config.ha_state_dir, netns=config.netns or None)
    try:
        pending = applier.pending_text()
        found = [(snapshot.CONFIRMED, applier.confirmed()),
                 (snapshot.PENDING, parse(pending) if pending else None)]
    except HaError as error:
        raise snapshot.SnapshotError(f"this box's HA pair configuration cannot be read: "
                                     f"{error}") from None
    return [(which, ha) for which, ha in found if ha is not None and ha.enabled]
