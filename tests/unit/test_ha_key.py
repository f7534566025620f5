"""The pair key is part of the HA pair's revision (issue 34, ha/core/applier.py): the key
in force is the pending revision's while one is pending, else the confirmed one - and a
box upgraded from the release before, with an ha.key and revisions that carry none,
keeps its key in force whatever is pending. Files only: the applier's key() reads the
state directory, nothing else."""
import os

from ha.core import peer
from ha.core.applier import HaApplier

CONFIRMED, NEW = "the key confirmed long ago", "a key given with the change"


def pending(applier, key=None):
    """A revision made pending as the given release leaves it: carrying key, or none."""
    revision = applier.store.create("alice", "apply", {"ha.toml": "[ha]\n"},
                                    base=applier.store.confirmed_id())
    if key is not None:
        peer.write_key(revision.path, key)
    applier.store.set_pending(revision.id, None, 600)
    return revision


def test_a_box_upgraded_from_a_lone_ha_key_keeps_it_in_force(tmp_path):
    applier = HaApplier(str(tmp_path))
    peer.write_key(str(tmp_path), CONFIRMED)
    assert applier.key() == CONFIRMED.encode()
    pending(applier)        # a change applied by the release before: no key of its own
    assert applier.key() == CONFIRMED.encode()


def test_a_pending_key_is_in_force_until_the_pending_change_goes(tmp_path):
    applier = HaApplier(str(tmp_path))
    peer.write_key(str(tmp_path), CONFIRMED)
    revision = pending(applier, NEW)
    assert applier.key() == NEW.encode()
    info = os.stat(os.path.join(revision.path, peer.KEY_NAME))
    assert oct(info.st_mode & 0o777) == "0o600"
    applier.store.clear_pending()       # rolled back: what restore leaves
    assert applier.key() == CONFIRMED.encode()


def test_a_box_without_any_key_has_none_in_force(tmp_path):
    applier = HaApplier(str(tmp_path))
    assert applier.key() is None
    pending(applier)
    assert applier.key() is None
