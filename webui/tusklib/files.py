"""Writing a file so that readers see the old or the new one, never half of either.
Plain Python (no Django): the policy engine's revision store, the appliance's boot
steps and tusk-net, and the agent's restore of tuning profiles use it."""
import os
import tempfile


def write_atomically(path, text, mode=0o600, owner=None):
    """A temporary file beside path, synced, given mode (and owner: (uid, gid)), renamed
    over path. The directory must exist. Nothing is left behind on failure."""
    fd, temporary = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(path)),
                                     prefix=".tmp-")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        if owner is not None:
            os.chown(temporary, *owner)
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        try:
            os.unlink(temporary)
        except FileNotFoundError:
            pass
        raise


class UnsafeDirectory(Exception):
    """A directory root keeps for itself is a link, or someone else's."""


def root_directory(path):
    """path, root's only (0700): made if missing, its mode put back; UnsafeDirectory if
    it is a link or not root's (the agent never writes through one)."""
    os.makedirs(path, mode=0o700, exist_ok=True)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError as exc:
        raise UnsafeDirectory(f"{path}: {exc.strerror}") from None
    try:
        if os.fstat(fd).st_uid != 0:
            raise UnsafeDirectory(f"{path} is not root's")
        os.fchmod(fd, 0o700)
    finally:
        os.close(fd)
