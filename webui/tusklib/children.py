"""Child processes of the agent: those that must not outlive it (dumpcap, the
self-test's responder and measurer), the sandbox of the capture analysis, and the one
way to run a child that answers in JSON (tusk-tune, the analysis, the self-test's
measurement). Plain Python: no Django."""
import ctypes
import json
import os
import resource
import selectors
import signal
import subprocess

PR_SET_PDEATHSIG = 1
PR_SET_NO_NEW_PRIVS = 38
_LIBC = ctypes.CDLL(None, use_errno=True)   # loaded here, not in a forked child
STOP_GRACE = 5          # seconds a child has between SIGTERM and SIGKILL
STDERR_KEPT = 1 << 20   # bytes of a streaming child's stderr kept for its error message


def end_with_parent(parent, signum=signal.SIGINT):
    """preexec_fn: the child gets signum when the thread that started it dies - a
    killed agent leaves nothing running (SIGINT lets dumpcap close its file properly).
    `ip netns exec` execs the program in the same process, and the setting survives
    exec (for programs without file capabilities)."""
    def apply():
        _LIBC.prctl(PR_SET_PDEATHSIG, signum, 0, 0, 0)
        if os.getppid() != parent:    # died before prctl: nobody would stop us
            os._exit(1)
    return apply


def confined(uid, gid, limits):
    """preexec_fn of a child that parses untrusted input (the capture analysis), in this
    order: a network namespace of its own (nothing but a loopback that is down: no
    network), no new privileges (no setuid program or file capability regains any),
    the resource limits {RLIMIT_*: value}, then user uid with group gid alone - unshare
    needs root, so it comes first. Killed with its parent (the setting set after the
    user change, which clears it)."""
    parent = os.getpid()

    def apply():
        os.unshare(os.CLONE_NEWNET)
        if _LIBC.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
        for which, value in limits.items():
            resource.setrlimit(which, (value, value))
        os.setgroups([])
        os.setgid(gid)
        os.setuid(uid)
        end_with_parent(parent, signal.SIGKILL)()
    return apply


class ChildFailed(Exception):
    """A child exited with a status its caller does not accept, or printed something that
    is not JSON. status: the exit status (negative: killed by that signal; None: still
    running); stderr: what it wrote there; reason: what went wrong, for a message."""

    def __init__(self, status, stderr, reason):
        super().__init__(stderr.strip() or reason)
        self.status, self.stderr, self.reason = status, stderr, reason


def run_json(argv, timeout, ok=(0,), **popen_kwargs):
    """Runs argv to its end and returns what it printed on stdout, parsed as JSON.
    stdout and stderr are read together (communicate), so a child that writes much on
    stderr never blocks on a full pipe. ChildFailed when its status is not in ok or its
    stdout is not JSON; subprocess.TimeoutExpired (the child killed) after timeout s."""
    done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=timeout, **popen_kwargs)
    if done.returncode not in ok:
        raise ChildFailed(done.returncode, done.stderr,
                          f"exited with status {done.returncode}")
    try:
        return json.loads(done.stdout)
    except ValueError:   # a crash after the status was set, or a child that printed nothing
        raise ChildFailed(done.returncode, done.stderr, "printed no JSON") from None


def json_lines(argv, poll=0.5, **popen_kwargs):
    """Runs argv and yields each line it prints on stdout, parsed as JSON, as it comes,
    and None after poll seconds without one (the caller may give up: closing the
    generator - contextlib.closing - stops the child). stderr is read all the while and
    kept for the error, so a chatty child never blocks on a full pipe. Once stdout ends:
    ChildFailed unless the child exits with status 0; the child is stopped on every way
    out."""
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, **popen_kwargs)
    stderr, partial = bytearray(), b""
    try:
        with selectors.DefaultSelector() as selector:
            selector.register(proc.stdout, selectors.EVENT_READ)
            selector.register(proc.stderr, selectors.EVENT_READ)
            while selector.get_map():
                ready = selector.select(poll)
                if not ready:
                    yield None
                for key, _ in ready:
                    chunk = os.read(key.fd, 65536)
                    if not chunk:
                        selector.unregister(key.fileobj)
                    elif key.fileobj is proc.stderr:
                        stderr += chunk
                        del stderr[:-STDERR_KEPT]
                    else:
                        *lines, partial = (partial + chunk).split(b"\n")
                        yield from _parsed(lines, proc, stderr)
        yield from _parsed([partial], proc, stderr)   # a last line without its newline
        status = proc.wait(STOP_GRACE)
        if status != 0:
            raise ChildFailed(status, stderr.decode(errors="replace"),
                              f"exited with status {status}")
    finally:
        stop(proc)
        proc.stdout.close()
        proc.stderr.close()


def _parsed(lines, proc, stderr):
    for line in filter(bytes.strip, lines):
        try:
            yield json.loads(line)
        except ValueError:
            raise ChildFailed(proc.poll(), stderr.decode(errors="replace"),
                              f"printed a line that is not JSON: {line[:200]!r}") from None


def stop(proc, grace=STOP_GRACE):
    """SIGTERM, then SIGKILL after grace seconds; returns once the child is reaped."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
