"""The agent's half of a restore: the operator's tuning profiles are written into
the operator's directory (the web process may not write there), checked again
first, then the boot profile is applied (or rolled back to none) by the Tuning
page's own job code, which runs tusk-tune and keeps its report for that page."""
import os

from jobs.registry import JobFailed, handler
from tusk.files import write_atomically
from tuning import agent_jobs as tuning_jobs
from tuning.core import profile as profiles
from tuning.core.applier import NO_PROFILE

from .document import tuning_problems


@handler("backup.tuning", "Restore tuning")
def restore_tuning(run):
    found, name = run.args.get("profiles") or {}, run.args["profile"]
    problems = tuning_problems(found, name)
    if problems:
        raise JobFailed("; ".join(f"{path}: {message}" for path, message in problems))
    directory = profiles.OPERATOR_DIR
    if found:
        run.progress(5, f"writing {len(found)} profile(s) into {directory}")
        try:
            os.makedirs(directory, mode=0o755, exist_ok=True)
            for profile, text in sorted(found.items()):
                write_atomically(os.path.join(directory, f"{profile}.conf"), text, 0o644)
        except OSError as error:
            raise JobFailed(f"cannot write into {directory}: {error.strerror}") from None
    result = {"written": sorted(found), "profile": name}
    if not run.args.get("apply"):
        return result
    done = tuning_jobs.rollback(run) if name == NO_PROFILE else tuning_jobs.apply(run)
    return {**done, **result}
