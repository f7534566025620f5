"""The Django side of commit-confirm, written once for every domain that applies a
configuration with a deadline (tusklib/commit.py is the agent's side):

- models.py: abstract DraftBase, RevisionBase and StateBase, the rows the agent mirrors
  from its root-owned store for the unprivileged web process;
- mirror.py: the one sync that copies a store's revisions and pending/confirmed state
  into those rows;
- jobs.py: the one job factory for the decisions (confirm, cancel: roll back now);
- views.py: the generic confirm/cancel/history/revision/rollback views and their URLs;
- domain.py: what a domain declares to get all of the above.

A domain is a declaration (policy/domain.py, network/domain.py, ha/domain.py); the
data-driven test suite tests/web/test_commitkit.py runs over every declared domain."""
