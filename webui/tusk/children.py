"""Child processes of the agent that must not outlive it (dumpcap, the self-test's
responder and measurer). Plain Python: no Django."""
import ctypes
import os
import signal

PR_SET_PDEATHSIG = 1
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
