"""Child processes of the agent that must not outlive it (dumpcap, the self-test's
responder and measurer), and the sandbox of the capture analysis. Plain Python: no
Django."""
import ctypes
import os
import resource
import signal

PR_SET_PDEATHSIG = 1
PR_SET_NO_NEW_PRIVS = 38
_LIBC = ctypes.CDLL(None, use_errno=True)   # loaded here, not in a forked child


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
