"""Child processes of the agent: those that must not outlive it (dumpcap, the
self-test's responder and measurer), the sandbox of the capture analysis (bubblewrap:
untrusted uploads are parsed there, seeing nothing of the host), and the one way to run
a child that answers in JSON (tusk-tune, the analysis, the self-test's measurement).
Plain Python: no Django."""
import ctypes
import json
import os
import resource
import selectors
import signal
import subprocess
import time

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


def confined(limits):
    """preexec_fn of the sandbox (bwrap, see sandbox()) of a child that parses untrusted
    input (the capture analysis), in this order: a network namespace of its own (nothing
    but a loopback that is down: no network; made here by root, so bwrap has no network
    to hand on), no new privileges (no setuid program or file capability regains any),
    the resource limits {RLIMIT_*: value}, which bwrap and everything it starts inherit,
    and killed with its parent. The user changes inside the sandbox (setpriv), once its
    mount namespace is in place."""
    parent = os.getpid()

    def apply():
        os.unshare(os.CLONE_NEWNET)
        if _LIBC.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
        for which, value in limits.items():
            resource.setrlimit(which, (value, value))
        end_with_parent(parent, signal.SIGKILL)()
    return apply


BWRAP = "/usr/bin/bwrap"       # Debian package bubblewrap; BR2_PACKAGE_BUBBLEWRAP
SETPRIV = "/usr/bin/setpriv"   # util-linux (Debian: essential; BR2_PACKAGE_UTIL_LINUX_SETPRIV)
_SETPRIV_CAPS = ("CAP_SETUID", "CAP_SETGID", "CAP_SETPCAP")   # all setpriv is left
_TOP_LEVEL = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")   # merged /usr: links


def interpreter(python):
    """python with the links and .. of its directory resolved, its own name kept: the
    path that names it inside the sandbox, where only what it needs is (a virtualenv's
    bin/python is a link that must stay one: Python finds pyvenv.cfg from it)."""
    return os.path.join(os.path.realpath(os.path.dirname(os.path.abspath(python))),
                        os.path.basename(python))


def interpreter_paths(python):
    """The directories `python` (an interpreter()) needs to start, read-only in the
    sandbox: its virtualenv (pyvenv.cfg beside its bin/), the installation its home
    names, and the installation the link python points to ends in (prefix: the parent of
    its bin/). Worked out from paths, never by running it (that would be as root)."""
    venv = os.path.dirname(os.path.dirname(python))
    paths = [os.path.dirname(os.path.dirname(os.path.realpath(python)))]
    try:
        with open(os.path.join(venv, "pyvenv.cfg"), encoding="utf-8") as cfg:
            lines = cfg.read().splitlines()
    except OSError:
        lines = None
    if lines is not None:
        paths.append(venv)
        for line in lines:
            key, _, value = line.partition("=")
            if key.strip() == "home" and value.strip():
                paths.append(os.path.dirname(os.path.realpath(value.strip())))
    return paths


def _outermost(paths):
    """paths without those inside another one, sorted: each mounted once."""
    kept = []
    for path in sorted(set(map(os.path.normpath, paths))):
        if not any(path == k or path.startswith(k.rstrip("/") + "/") for k in kept):
            kept.append(path)
    return kept


def sandbox(argv, uid, gid, visible, status_fd, bwrap=BWRAP, setpriv=SETPRIV):
    """The command that runs argv in the analysis sandbox (bubblewrap), started by root
    with confined()'s preexec_fn: new mount, PID, IPC, UTS and cgroup namespaces (the
    network namespace is confined()'s); a root of its own holding /usr and the
    directories `visible` (the interpreter, Tusk's code), all read-only at their own
    paths - no /etc, /dev, /proc, /tmp, /var, /root, /data, no capture directory: the
    input comes as inherited descriptors, the output on stdout (Python needs none of
    them: its randomness comes from getrandom(), not /dev/urandom). bwrap
    keeps only what setpriv needs to become uid:gid with no other group, no capability
    (bounding set emptied) and no new privileges; setpriv then runs argv. No user
    namespace: root needs none, and the appliance's kernel has none (CONFIG_USER_NS off,
    which keeps that attack surface from every unprivileged process). bwrap reports on
    status_fd (--json-status-fd): an "exit-code" line only once the sandbox was set up
    and setpriv started. Relative paths in visible are refused (ValueError); so is / ."""
    if any(not os.path.isabs(p) or os.path.normpath(p) == "/" for p in visible):
        raise ValueError(f"not a directory the sandbox can show on its own: {visible}")
    call = [bwrap, "--unshare-ipc", "--unshare-pid", "--unshare-uts", "--unshare-cgroup-try",
            "--hostname", "sandbox", "--die-with-parent", "--new-session",
            "--json-status-fd", str(status_fd), "--cap-drop", "ALL"]
    for cap in _SETPRIV_CAPS:
        call += ["--cap-add", cap]
    call += ["--ro-bind", "/usr", "/usr"]
    for top in _TOP_LEVEL:
        if os.path.islink(top):
            call += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            call += ["--ro-bind", top, top]
    made = {"/"}
    for path in _outermost(["/usr", *visible]):
        if path == "/usr":
            continue
        parts = path.split("/")[1:-1]
        for depth in range(1, len(parts) + 1):   # the way there: empty, root's, 0755
            way = "/" + "/".join(parts[:depth])
            if way not in made:
                made.add(way)
                call += ["--dir", way]
        call += ["--ro-bind", path, path]
    call += ["--remount-ro", "/", "--chdir", "/", "--",
             setpriv, f"--reuid={uid}", f"--regid={gid}", "--clear-groups", "--inh-caps=-all",
             "--bounding-set=-all", "--no-new-privs", "--", *argv]
    return call


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


def stop_leftover(pidfile, program, needle, seconds=30):
    """Ends a daemon a dead agent left running: the process pidfile names, signalled
    (SIGTERM, waited for up to seconds) only if it is program - its executable's name,
    or a word of its command line - started with needle (its own configuration file)
    among its arguments. Its pid, or None when there was none such."""
    try:
        with open(pidfile, encoding="ascii") as handle:
            pid = int(handle.read().strip())
        executable = os.path.basename(os.readlink(f"/proc/{pid}/exe"))
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            argv = handle.read().split(b"\0")
    except (OSError, ValueError):
        return None
    if (executable != program and program.encode() not in argv) or needle.encode() not in argv:
        return None
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + seconds
    while os.path.exists(f"/proc/{pid}") and time.monotonic() < deadline:
        time.sleep(0.1)
    return pid


def command_line(pid):
    """pid's argv, or None when it is gone (or a kernel thread)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            raw = handle.read(65536)
    except OSError:
        return None
    return [part.decode(errors="replace") for part in raw.split(b"\0")[:-1]] or None


def stop_daemon(find, seconds=10):
    """Ends the daemon find() names (its pid, or None: gone, or a stale pid file naming
    another process): SIGTERM, up to seconds for it to go, then SIGKILL."""
    pid = find()
    if pid is None:
        return
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + seconds
    while find() == pid and time.monotonic() < deadline:
        time.sleep(0.05)
    if find() == pid:
        os.kill(pid, signal.SIGKILL)


def systemctl_problem(*argv):
    """Runs systemctl argv: None when it did it, else what it said (for the domain's
    error naming the units)."""
    result = subprocess.run(["systemctl", *argv], capture_output=True, text=True,
                            check=False, stdin=subprocess.DEVNULL)
    if result.returncode == 0:
        return None
    return (f"systemctl {' '.join(argv)}: "
            f"{result.stderr.strip() or f'exit status {result.returncode}'}")


SYSTEM_SLICE = "/sys/fs/cgroup/system.slice"


def unit_running(unit, slice_dir=SYSTEM_SLICE):
    """Whether a service unit has a process: its cgroup (systemd's unified hierarchy)
    lists one. A file read, where `systemctl is-active` is a process and a D-Bus call
    to systemd - which the agent's periodic status made every few seconds, and which
    under the test VM's emulation cost the box a CPU's worth (tests/vm/test_appliance.py).
    Without the unified hierarchy, systemctl's word."""
    if not os.path.isdir(slice_dir):
        return systemctl_problem("is-active", "--quiet", unit) is None
    try:
        with open(os.path.join(slice_dir, unit, "cgroup.procs"), "rb") as handle:
            return bool(handle.read(64).strip())
    except OSError:
        return False      # no cgroup: the unit is not running
