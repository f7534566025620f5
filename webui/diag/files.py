"""The capture directory's files, named from the capture's id alone (plain Python: the
agent, the quota and the web views all use it):

    capture-<id>.<format>        a capture
    capture-<id>-<n>.<format>    ring-buffer file n of a capture (1 is the oldest)
    upload-<id>.<format>         an upload (format: pcapng or pcap)

The web user can write the directory (its group, mode 2770), so any entry in it may have
been planted: a link to /etc/shadow, a FIFO, a hard link. No path is ever taken from a
Capture row. The directory is opened once without following a link, and every name is
one component relative to that descriptor; an entry counts only when lstat shows a
regular file; files are opened with O_NOFOLLOW and checked again on the descriptor
(the entry may have been swapped since). The agent's own spool (capture_spool_dir, root
only) is where dumpcap writes; publish() moves finished files from there.
"""
import os
import re
import stat

_NAME = re.compile(r"(?:capture|upload)-([1-9][0-9]*)(?:-([1-9][0-9]*))?\.(?:pcapng|pcap)")
FORMATS = ("pcapng", "pcap")


class UnsafeFile(Exception):
    """An entry that is not what the agent or the web process wrote there."""


def capture_name(pk, fmt, part=None):
    assert fmt in FORMATS
    return f"capture-{int(pk)}{f'-{int(part)}' if part else ''}.{fmt}"


def upload_name(pk, fmt):
    assert fmt in FORMATS
    return f"upload-{int(pk)}.{fmt}"


class Directory:
    """The capture directory (or the spool), open: `with Directory(path) as d: ...`."""

    def __init__(self, path):
        self.path = str(path)
        try:
            self.fd = os.open(self.path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        except OSError as exc:
            raise UnsafeFile(f"{self.path}: cannot open the directory: {exc.strerror}") from None

    def __enter__(self):
        return self

    def __exit__(self, *_):
        os.close(self.fd)

    @property
    def gid(self):
        return os.fstat(self.fd).st_gid

    def _regular(self, name):
        try:
            info = os.lstat(name, dir_fd=self.fd)
        except FileNotFoundError:
            return None
        return info if stat.S_ISREG(info.st_mode) else None

    def listing(self):
        """{capture id: [(name, bytes)]}: the regular files named for each id, in order."""
        found = {}
        for name in os.listdir(self.fd):
            match = _NAME.fullmatch(name)
            info = match and self._regular(name)
            if info:
                found.setdefault(int(match.group(1)), []).append(
                    (int(match.group(2) or 0), name, info.st_size))
        return {pk: [(name, size) for _, name, size in sorted(files)]
                for pk, files in found.items()}

    def names(self, pk):
        return [name for name, _ in self.listing().get(pk, [])]

    def open(self, name):
        """A descriptor open for reading on the regular file `name`, linked nowhere else
        (a hard link the web user made to a file it cannot read would otherwise lend it
        the agent's eyes); UnsafeFile otherwise. O_NONBLOCK: a planted FIFO must not
        hang the open."""
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=self.fd)
        except OSError as exc:
            raise UnsafeFile(f"{name}: {exc.strerror} (a link?)") from None
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:
            os.close(fd)
            raise UnsafeFile(f"{name}: not a regular file of this directory")
        os.set_blocking(fd, True)
        return fd

    def create(self, name):
        """A new file `name`, 0640, open for writing; never through a planted link."""
        return os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o640,
                       dir_fd=self.fd)

    def delete(self, pk):
        """Unlinks the regular files named for capture pk; returns the bytes freed."""
        freed = 0
        for name, size in self.listing().get(pk, []):
            try:
                os.unlink(name, dir_fd=self.fd)
            except FileNotFoundError:
                continue
            freed += size
        return freed

    def delete_name(self, name):
        if self._regular(name):
            os.unlink(name, dir_fd=self.fd)


def spool(path, shared):
    """The agent's spool, created root-only if missing; refused if anyone else owns it or
    it is not on the capture directory's file system (see publish)."""
    os.makedirs(path, mode=0o700, exist_ok=True)
    directory = Directory(path)
    info = os.fstat(directory.fd)
    problem = (f"it is owned by uid {info.st_uid}, not the agent's"
               if info.st_uid != os.geteuid() else
               f"it is not on the file system of {shared.path}"
               if info.st_dev != os.fstat(shared.fd).st_dev else None)
    if problem:
        os.close(directory.fd)
        raise UnsafeFile(f"capture_spool_dir {path}: {problem}")
    os.fchmod(directory.fd, 0o700)
    return directory


def publish(source, shared, moves):
    """Moves [(spool name, shared name)] from the spool into the capture directory:
    each spool file opened without following a link, given to root and the directory's
    group 0640 on its descriptor, then hard-linked under its new name - link(2) never
    follows nor replaces what is at the new name, so a planted entry fails the move
    (UnsafeFile naming it) - and unlinked from the spool. A link is atomic and costs no
    space (a copy of a 1 GB capture would need 1 GB more); it needs one file system.
    All or nothing: on failure, what was moved is removed again. The spool's files of
    the capture are gone either way."""
    done = []
    try:
        for old, new in moves:
            fd = source.open(old)
            try:
                os.fchown(fd, 0, shared.gid)
                os.fchmod(fd, 0o640)
            finally:
                os.close(fd)
            try:
                os.link(old, new, src_dir_fd=source.fd, dst_dir_fd=shared.fd,
                        follow_symlinks=False)
            except FileExistsError:
                raise UnsafeFile(f"{new} is in the way in {shared.path} (the agent did not "
                                 "put it there): the captured packets were discarded") from None
            except OSError as exc:
                raise UnsafeFile(f"cannot move {old} from {source.path} to {shared.path}: "
                                 f"{exc.strerror}") from None
            done.append(new)
    except UnsafeFile:
        for new in done:
            shared.delete_name(new)
        raise
    finally:
        for old, _ in moves:
            source.delete_name(old)
    return done
