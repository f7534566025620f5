"""A commit-confirm domain that exists for tests/unit/test_commit.py only, registered
through TUSK_COMMIT_TEST_DOMAINS (which that test sets): its live state is one file,
live.txt in the state directory, so a test sees what tusklib.commit and its detached
watchdog do without nftables or a network namespace."""
import os
from enum import IntEnum

from tusklib.commit import CommitConfirm, Failure, RestoreFailed
from tusklib.files import write_atomically
from tusklib.problems import Problems

DOMAIN = "file-test"
CONTENT = "content.txt"
LIVE = "live.txt"
RESTORE_FAILS = "restore-fails"   # present in the state directory: restore() fails


class FileCode(IntEnum):
    LOCKED = 1
    NOT_PENDING = 2
    REVISION = 3
    IO = 4
    RESTORE = 5
    REFUSED = 6   # a confirm that check() refused


class FileError(Problems):
    codes = FileCode


class FileCommit(CommitConfirm):
    domain = DOMAIN
    error_class = FileError
    failure_codes = {Failure.LOCKED: FileCode.LOCKED, Failure.NOT_PENDING: FileCode.NOT_PENDING,
                     Failure.REVISION: FileCode.REVISION, Failure.STATE_DIR: FileCode.IO,
                     Failure.RESTORE: FileCode.RESTORE}
    restored = "file"

    def live(self):
        try:
            with open(os.path.join(self.store.state_dir, LIVE), encoding="utf-8") as handle:
                return handle.read()
        except FileNotFoundError:
            return None

    def apply(self, text, timeout, **extra):
        """text made live as a pending revision (extra: kept in pending.json)."""
        with self.locked():
            self.expire_overdue()
            base = self.store.confirmed_id()
            revision = self.store.create("test", "apply", {CONTENT: text}, base=base)
            self.begin(revision, base, timeout, **extra)
            write_atomically(os.path.join(self.store.state_dir, LIVE), text)
        return revision

    def restore(self, pending):
        if os.path.exists(os.path.join(self.store.state_dir, RESTORE_FAILS)):
            raise RestoreFailed("the test made restoring fail")
        base = pending["base"]
        text = self.store.get(base).read(CONTENT) if base is not None else ""
        write_atomically(os.path.join(self.store.state_dir, LIVE), text)
