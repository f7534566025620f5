"""The on-box record of every apply, in the shared commit-confirm store
(tusklib/commit.py: a directory per revision under the state directory, pending.json,
the confirmed pointer). A policy revision holds two files:

    <state>/revisions/000042/policy.yaml  the policy as submitted
    <state>/revisions/000042/ruleset.nft  the rendered ruleset
    <state>/failsafe.nft                  what runs when no revision is confirmed
"""
import os

from tusklib import commit
from tusklib.commit import CONFIRMED, PENDING

from .errors import Code, PolicyError

__all__ = ["CONFIRMED", "FAILURE_CODES", "PENDING", "Revision", "Store"]

FAILSAFE = "failsafe.nft"

# The policy's code for each failure of the commit-confirm mechanism.
FAILURE_CODES = {
    commit.Failure.LOCKED: Code.LOCKED,
    commit.Failure.NOT_PENDING: Code.NOT_PENDING,
    commit.Failure.REVISION: Code.REVISION,
    commit.Failure.STATE_DIR: Code.IO,
    commit.Failure.RESTORE: Code.APPLY,
}


class Revision(commit.Revision):
    """One apply attempt of a policy."""

    @property
    def ruleset(self):
        return self.read("ruleset.nft")

    @property
    def policy_text(self):
        return self.read("policy.yaml")


class Store(commit.Store):
    """Revisions, the pending marker and the confirmed pointer of one target."""

    revision_class = Revision

    def __init__(self, state_dir):
        super().__init__(state_dir, commit.error_factory(PolicyError, FAILURE_CODES))

    def create(self, user, action, policy_text, ruleset, **extra):
        return super().create(user, action, {"policy.yaml": policy_text,
                                             "ruleset.nft": ruleset}, **extra)

    def no_policy_ruleset(self, default):
        """What the target runs when no revision is confirmed: `failsafe.nft` in the state
        directory when there is one (the appliance writes a forward-drop table there at
        boot, so a first apply that rolls back fails closed), else `default`."""
        try:
            with open(os.path.join(self.state_dir, FAILSAFE), encoding="utf-8") as handle:
                return handle.read()
        except FileNotFoundError:
            return default
