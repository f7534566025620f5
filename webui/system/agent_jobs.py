"""The agent's half of the System page: the console password file, which only root may
write. The job row is untrusted: its argument is checked again with the form's own
consolepw.argument_problem(), and the file's path comes from the agent's configuration
(beside tusk.toml), never from the row."""
import os
import stat

from accounts.models import AuditEntry
from appliance import consolepw
from jobs.registry import JobFailed, handler
from tusklib.files import write_atomically


def _safe_directory(directory):
    """Root's own, writable by no one else: nothing there is a link someone else planted."""
    try:
        info = os.stat(directory)
    except OSError as error:
        raise JobFailed(f"{directory}: {error.strerror}; nothing changed") from None
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != 0 or info.st_mode & 0o022:
        raise JobFailed(f"{directory} is not a directory only root may write; nothing changed")


@handler("system.console_password", "Set the console password")
def console_password(run):
    value = run.args.get("hash") if isinstance(run.args, dict) else None
    problem = consolepw.argument_problem(value)
    if problem:
        raise JobFailed(f"hash: {problem}; nothing changed")
    path = consolepw.path_beside(run.config.path)
    _safe_directory(os.path.dirname(path))
    try:
        if value == consolepw.CLEAR:
            if os.path.lexists(path):
                os.unlink(path)
        else:
            write_atomically(path, value + "\n", 0o600, owner=(0, 0))
    except OSError as error:
        raise JobFailed(f"{path}: {error.strerror}; nothing changed") from None
    action = "console password cleared" if value == consolepw.CLEAR else "console password set"
    AuditEntry.objects.create(username=run.user, action=action, target="console",
                              detail={"job": run.job.pk})
    return {"set": value != consolepw.CLEAR}
