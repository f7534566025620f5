"""The agent's half of a restore: the operator's tuning profiles are written into
the operator's directory (the web process may not write there), checked again
first, then the boot profile is applied (or rolled back to none) by the Tuning
page's own job code, which runs tusk-tune and keeps its report for that page."""
import os

from jobs.registry import JobFailed, handler
from tuning import agent_jobs as tuning_jobs
from tuning.core import profile as profiles
from tuning.core.applier import NO_PROFILE
from tusklib.files import write_atomically

from .document import tuning_problems


@handler("backup.tuning", "Restore tuning")
def restore_tuning(run):
    """The job row is the web process's word only: its profiles are checked again with
    the upload's own check (names, sizes, tusk-tune's parser and its sysctl allow-list)
    before a file is written; each file's name is a checked profile name, written
    beside (never through) whatever is at that path."""
    found, name = run.args.get("profiles"), run.args.get("profile")
    if not isinstance(found, dict):
        raise JobFailed("tuning.profiles: expected {name: the profile's text}")
    if not isinstance(name, str):
        raise JobFailed("tuning.boot_profile: expected a profile's name")
    problems = tuning_problems(found, name)
    if problems:
        raise JobFailed("; ".join(map(str, problems)))
    directory = profiles.OPERATOR_DIR
    if found:
        run.progress(5, f"writing {len(found)} profile(s) into {directory}")
        try:
            os.makedirs(directory, mode=0o755, exist_ok=True)
            for profile, text in sorted(found.items()):
                # a temporary file renamed over the path: a link there is replaced
                write_atomically(os.path.join(directory, f"{profile}.conf"), text, 0o644)
        except OSError as error:
            raise JobFailed(f"cannot write into {directory}: {error.strerror}") from None
    result = {"written": sorted(found), "profile": name}
    if not run.args.get("apply"):
        return result
    done = tuning_jobs.rollback(run) if name == NO_PROFILE else tuning_jobs.apply(run)
    return {**done, **result}
