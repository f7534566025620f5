"""Agent side: mirror the on-box revision store and the live table into the database."""
import hashlib
import threading
import time

from commitkit import mirror
from tusklib.names import BRIDGE_FAMILY, BRIDGE_TABLE, FAMILY, OFFLOAD_TABLE, TABLE
from tusklib.target import Target

from .core.revisions import Store
from .models import Revision, TargetState

_LOCK = threading.Lock()  # the agent syncs from job threads and its periodic task


def sha256(text):
    return hashlib.sha256(text.encode()).hexdigest()


def listing(target):
    """The live tusk table without counter values, and the hardware fast path's and the
    bridges' tables after it where they are (a release before them had none), or None
    when table tusk is not loaded."""
    result = target.run(["nft", "-s", "list", "table", FAMILY, TABLE])
    if not result.ok:
        return None
    listed = result.stdout
    for family, table in ((FAMILY, OFFLOAD_TABLE), (BRIDGE_FAMILY, BRIDGE_TABLE)):
        other = target.run(["nft", "-s", "list", "table", family, table])
        listed += other.stdout if other.ok else ""
    return listed


# Listing a large table costs nft real CPU (a 1 000-class table: ~0.1 s), so the live
# table is compared with what Tusk loaded every [agent] live_check_interval seconds,
# after each policy job, and whenever the store's pending/confirmed state changes.
_last = {"checked": 0.0, "state": None}


def sync(config, record_listing_for=None, periodic=False):
    """Copies new and changed revisions, then the pending/confirmed state and whether
    the live table is the one the live revision loaded. record_listing_for: a
    revision just loaded by this agent, whose listing is taken now."""
    with _LOCK:
        return _sync(config, record_listing_for, periodic)


def _sync(config, record_listing_for, periodic):
    store = Store(config.state_dir)
    pending = store.pending()
    live_number = pending["revision"] if pending else store.confirmed_id()
    now = time.monotonic()
    # a periodic call that sees the store unchanged has nothing to copy
    store_state = mirror.store_key(store)
    if periodic and store_state == _last["state"] and \
            now - _last["checked"] < config.live_check_interval:
        mirror.touch(TargetState)
        return None
    _last.update(checked=now, state=store_state)
    mirror.copy_revisions(Revision, store, lambda revision: {
        "policy_text": revision.policy_text,
        "ruleset": revision.ruleset,
        # the ruleset for a kernel with flowtables, as the draft's is hashed: the
        # same policy compares the same where auto classes had no flowtable
        "ruleset_sha256": revision.meta.get("canonical_sha256") or sha256(revision.ruleset)})
    target = Target(config.netns or None)
    live = listing(target)
    if record_listing_for is not None and live is not None:
        Revision.objects.filter(number=record_listing_for).update(listing=live)
    matches = None
    if live_number is not None:
        row = Revision.objects.filter(number=live_number).only("listing").first()
        if row is not None and not row.listing and live is not None:
            # first sight of a revision loaded outside the agent (the CLI): take it as is
            Revision.objects.filter(number=live_number).update(listing=live)
            matches = True
        elif row is not None:
            matches = live is not None and live == row.listing
    state = mirror.write_state(TargetState, store, table_loaded=live is not None,
                               matches=matches)
    return state
