"""The log directory: ulogd's current file and the rotated ones, read by the web process
and kept within its bound by the agent (plain Python).

    firewall.json      ulogd appends here (constants.CURRENT)
    firewall.json.1    the previous one ... firewall.json.<files - 1>, the oldest

The directory is root's, group of the web user, mode 2750: ulogd (root) writes, the
agent renames and deletes, the web user only reads - files 0640, in its group by the
directory's set-group-id bit. Nobody but root can put anything there, and the agent
puts that right on every run (prepare): anything else found there - a link, a FIFO, a
file under another name or of another owner, a second name of a file - is removed, never
followed or opened, and never given the web user's group; the web process reads none
of it either. The directory is opened once without following a
link; every name is one component relative to it; a file counts only when lstat shows a
regular file, and is opened with O_NOFOLLOW and checked again on the descriptor.

Rotation: when the current file has reached the size of one file, the rotated ones move
up a number (the last is deleted), the current one becomes firewall.json.1 and the ulogd
that has it open gets SIGHUP, on which it opens firewall.json anew. The ulogd found is the
one holding that very file (its device and inode) among processes whose program is
ulogd: a lab's, a test's or the appliance's, whatever its network namespace."""
import os
import re
import shutil
import signal
import stat
from dataclasses import dataclass

from .constants import CURRENT, MB

_NAME = re.compile(rf"{re.escape(CURRENT)}(?:\.([1-9][0-9]{{0,3}}))?")
BLOCK = 256 * 1024
DIRECTORY_MODE = 0o2750
FILE_MODE = 0o640


class UnsafeFile(Exception):
    """The log directory, or an entry in it, is not what it must be."""


@dataclass(frozen=True)
class Entry:
    """A log file: number 0 is the current one, higher numbers are older."""

    number: int
    name: str
    size: int
    mtime: float


def _ours(info):
    """Whether a stat result is what ulogd (root) writes and the agent renames: root's
    regular file with one name. A file of the web user's, a second name of another file
    (its other name removed, it would have one again) is none of ours."""
    return stat.S_ISREG(info.st_mode) and info.st_nlink == 1 and info.st_uid == 0


def file_name(number):
    return CURRENT if number == 0 else f"{CURRENT}.{int(number)}"


class LogDirectory:
    """The log directory, open: `with LogDirectory(path) as logs: ...`."""

    def __init__(self, path):
        self.path = str(path)
        try:
            self.fd = os.open(self.path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        except OSError as exc:
            raise UnsafeFile(f"{self.path}: cannot open the log directory: "
                             f"{exc.strerror}") from None

    def __enter__(self):
        return self

    def __exit__(self, *_):
        os.close(self.fd)

    def _lstat(self, name):
        try:
            return os.lstat(name, dir_fd=self.fd)
        except FileNotFoundError:
            return None

    def entries(self):
        """The log files, newest first: root's regular files under the names above,
        linked nowhere else."""
        found = []
        for name in os.listdir(self.fd):
            match = _NAME.fullmatch(name)
            info = match and self._lstat(name)
            if info and _ours(info):
                found.append(Entry(int(match.group(1) or 0), name, info.st_size,
                                   info.st_mtime))
        return sorted(found, key=lambda entry: entry.number)

    def open(self, name):
        """A descriptor open for reading on the log file `name`; UnsafeFile unless it is
        one (_ours, checked on the descriptor; O_NONBLOCK: a FIFO must not hang the open)."""
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=self.fd)
        except OSError as exc:
            raise UnsafeFile(f"{name}: {exc.strerror}") from None
        if not _ours(os.fstat(fd)):
            os.close(fd)
            raise UnsafeFile(f"{name}: not a log file (root's regular file, one link)")
        os.set_blocking(fd, True)
        return fd


# -- reading (the web process) -----------------------------------------------------------

@dataclass
class Search:
    """The newest records that matched (newest first), how many bytes were read, and
    whether every file was read to its start (False: the scan budget ran out first,
    or the filter's start time was reached)."""

    records: list
    scanned: int = 0
    complete: bool = True


def _lines_backwards(fd, size, budget):
    """The lines of a file from its end back, reading at most budget bytes: (line,
    bytes read so far). A line cut by the budget is not yielded."""
    position, tail, spent = size, b"", 0
    while position > 0 and spent < budget:
        step = min(BLOCK, position, budget - spent)
        position -= step
        spent += step
        lines = (os.pread(fd, step, position) + tail).split(b"\n")
        tail = lines[0]
        for line in reversed(lines[1:]):
            if line:
                yield line, spent
    if position == 0 and tail:
        yield tail, spent


def search(path, parse, match, limit, scan_bytes, since=None, candidate=None):
    """The newest `limit` records of the log directory at path for which match(record)
    holds, newest first. parse(line) turns a line into a record (None: skipped); a line
    for which candidate(line) is false is skipped unparsed (it cannot match - and then
    it does not end the search at `since` either). At most scan_bytes are read; records
    before `since` (seconds) end the search, and so do files last written before it.
    UnsafeFile if the directory cannot be opened."""
    found = Search([])
    with LogDirectory(path) as logs:
        for entry in logs.entries():
            if since is not None and entry.mtime < since:
                found.complete = False
                return found
            try:
                fd = logs.open(entry.name)
            except UnsafeFile:
                continue     # rotated away or replaced since it was listed
            try:
                size, spent = os.fstat(fd).st_size, 0
                for line, spent in _lines_backwards(fd, size, scan_bytes - found.scanned):
                    if candidate is not None and not candidate(line):
                        continue
                    record = parse(line)
                    if record is None:
                        continue
                    if since is not None and record.time < since:
                        found.scanned += spent
                        found.complete = False
                        return found
                    if match(record):
                        found.records.append(record)
                        if len(found.records) >= limit:
                            found.scanned += spent
                            found.complete = False
                            return found
                found.scanned += spent
            finally:
                os.close(fd)
            if found.scanned >= scan_bytes:
                found.complete = False
                return found
    return found


# -- keeping it (the agent, as root) -----------------------------------------------------

def prepare(path, gid):
    """The log directory, created if missing, made root's, group gid, 2750 (on its
    descriptor), with everything that is not a log file removed and the log files made
    root's, group gid, 0640. Returns (LogDirectory, [what was removed]); UnsafeFile
    if path is a link or someone else's directory."""
    assert shutil.rmtree.avoids_symlink_attacks
    try:
        os.mkdir(path, DIRECTORY_MODE)
    except FileExistsError:
        pass
    logs = LogDirectory(path)
    info = os.fstat(logs.fd)
    if info.st_uid != 0:
        os.close(logs.fd)
        raise UnsafeFile(f"{path}: the log directory is owned by uid {info.st_uid}, not "
                         "root: nothing in it is trusted - remove it, the agent makes it anew")
    os.fchown(logs.fd, 0, gid)
    os.fchmod(logs.fd, DIRECTORY_MODE)
    return logs, _tidy(logs, gid)


def _tidy(logs, gid):
    removed = []
    for name in os.listdir(logs.fd):
        info = logs._lstat(name)
        if info is None:
            continue
        if _NAME.fullmatch(name) and _ours(info):
            if (info.st_uid, info.st_gid, stat.S_IMODE(info.st_mode)) != (0, gid, FILE_MODE):
                try:
                    fd = logs.open(name)
                except UnsafeFile:
                    continue     # swapped since lstat: the next run looks again
                try:
                    os.fchown(fd, 0, gid)
                    os.fchmod(fd, FILE_MODE)
                finally:
                    os.close(fd)
            continue
        if stat.S_ISDIR(info.st_mode):
            # fd-relative, each level opened without following a link
            # (shutil.rmtree.avoids_symlink_attacks)
            shutil.rmtree(name, dir_fd=logs.fd)
        else:
            os.unlink(name, dir_fd=logs.fd)    # a name only: never what a link points to
        removed.append(name)
    return removed


def writers(info):
    """The pids of the ulogd processes that have the file of stat result `info` open."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if os.path.basename(os.readlink(f"/proc/{pid}/exe")) != "ulogd":
                continue
            for fd in os.listdir(f"/proc/{pid}/fd"):
                held = os.stat(f"/proc/{pid}/fd/{fd}")
                if (held.st_dev, held.st_ino) == (info.st_dev, info.st_ino):
                    found.append(int(pid))
                    break
        except OSError:     # gone meanwhile, or a kernel thread
            continue
    return found


@dataclass
class Kept:
    """What one run of keep() did and found."""

    rotated: bool = False
    deleted: tuple = ()
    removed: tuple = ()
    total: int = 0
    writers: tuple = ()


def keep(path, gid, files, file_bytes):
    """One run of the agent's rotation: prepare the directory, rotate the current file
    once it holds file_bytes (SIGHUP to the ulogd writing it), delete rotated files past
    `files` and, oldest first, while all of them hold more than files x file_bytes."""
    logs, removed = prepare(path, gid)
    kept = Kept(removed=tuple(removed))
    deleted = []
    with logs:
        current = logs._lstat(CURRENT)
        held = writers(current) if current and stat.S_ISREG(current.st_mode) else []
        kept.writers = tuple(held)
        if current and stat.S_ISREG(current.st_mode) and current.st_size >= file_bytes:
            for entry in reversed(logs.entries()):
                if entry.number == 0:
                    continue
                if entry.number + 1 >= files:
                    os.unlink(entry.name, dir_fd=logs.fd)
                    deleted.append(entry.name)
                else:
                    os.rename(entry.name, file_name(entry.number + 1), src_dir_fd=logs.fd,
                              dst_dir_fd=logs.fd)
            os.rename(CURRENT, file_name(1), src_dir_fd=logs.fd, dst_dir_fd=logs.fd)
            for pid in held:
                os.kill(pid, signal.SIGHUP)
            kept.rotated = True
        entries = logs.entries()
        total = sum(entry.size for entry in entries)
        for entry in reversed(entries):
            if entry.number == 0 or (entry.number < files and total <= files * file_bytes):
                continue
            os.unlink(entry.name, dir_fd=logs.fd)
            deleted.append(entry.name)
            total -= entry.size
        kept.deleted, kept.total = tuple(deleted), total
    return kept


def megabytes(size):
    return round(size / MB, 1)
