"""The agent's tuning jobs: plan, apply, verify and roll back with tusk-tune. Each runs
the tusk-tune command rather than its engine in this process: only a process of its
own can enter the lab's namespace (tusk-tune --netns runs itself again under `ip
netns exec`, which mounts that namespace's /sys). What it prints with --json is kept
in TuningReport for the Tuning page; apply and rollback plan again afterwards, so
that the page shows what is left to do."""
import os
import subprocess
import sys

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from jobs.registry import JobFailed, handler
from network.core.applier import CONFIG_NAME
from tusklib import children

from .core.profile import DEFAULT_PROFILE
from .forms import ProfileForm
from .models import TuningReport

TUSK_TUNE = settings.BASE_DIR / "bin" / "tusk-tune"
DRIFT = 1      # verify's exit status when values drifted: a result, not a failure
TIMEOUT = 600  # seconds: an ethtool that hangs must not hold an agent worker for ever


def _tusk_tune(run, command, *argv, ok=(0,)):
    """Runs `tusk-tune --json COMMAND ARGV` on the agent's target and stores what it
    printed as the report of that command; a failure is stored too, then raised."""
    config = run.config
    call = [sys.executable, str(TUSK_TUNE), "--json", "--state-dir", config.tuning_state_dir,
            "--policy-dir", config.state_dir]
    if config.netns:   # the lab's confirmed network.toml is in its network state dir
        call += ["--netns", config.netns, "--network",
                 os.path.join(config.network_state_dir, CONFIG_NAME)]
    result, error = None, ""
    try:
        result = children.run_json(call + [command, *argv], TIMEOUT, ok=ok)
    except subprocess.TimeoutExpired:
        error = f"tusk-tune {command} did not finish in {TIMEOUT} s and was stopped"
    except children.ChildFailed as exc:   # a crash: its traceback is on stderr
        error = exc.stderr.strip() or f"tusk-tune {command} {exc.reason}"
    with transaction.atomic():
        TuningReport.objects.update_or_create(kind=command, defaults={
            "profile": result["profile"] if result else (argv[-1] if argv else ""),
            "result": result, "error": error, "job": run.job, "finished_at": timezone.now()})
    if error:
        raise JobFailed(error)
    return result


def _profile(run):
    """The job's profile, checked as the Tuning page's form checks it: one of the
    profiles there are, by name. A job row is the web process's word only; anything
    else fails the job before tusk-tune runs."""
    form = ProfileForm({"profile": run.args.get("profile")})
    if not form.is_valid():
        raise JobFailed("; ".join(f"{field}: {' '.join(errors)}"
                                  for field, errors in form.errors.items()))
    return form.cleaned_data["profile"]


@handler("tuning.plan", "Plan tuning", retry_safe=True)
def plan(run):
    profile = _profile(run)
    run.progress(10, f"planning profile {profile}")
    planned = _tusk_tune(run, "plan", "--", profile)
    return {"profile": profile, "writes": len(planned["writes"]),
            "warnings": len(planned["warnings"])}


@handler("tuning.apply", "Apply tuning")
def apply(run):
    profile = _profile(run)
    run.progress(10, f"applying profile {profile}")
    applied = _tusk_tune(run, "apply", "--", profile)
    run.progress(80, "planning again: what is left to do")
    left = _tusk_tune(run, "plan", "--", profile)
    return {"profile": profile, "written": len(applied["written"]),
            "skipped": len(applied["skipped"]), "left": len(left["writes"])}


@handler("tuning.verify", "Verify tuning", retry_safe=True)
def verify(run):
    run.progress(10, "comparing what apply set with the values now")
    verified = _tusk_tune(run, "verify", ok=(0, DRIFT))
    return {"profile": verified["profile"], "checked": verified["checked"],
            "drift": len(verified["drift"])}


@handler("tuning.rollback", "Roll back tuning")
def rollback(run):
    run.progress(10, "restoring the values from before the first apply")
    restored = _tusk_tune(run, "rollback")
    # an apply stopped half-way saved the old values but not its profile's name
    profile = restored["profile"] or DEFAULT_PROFILE
    run.progress(80, "planning again: what is left to do")
    left = _tusk_tune(run, "plan", "--", profile)
    return {"profile": profile, "restored": len(restored["written"]),
            "skipped": len(restored["skipped"]), "left": len(left["writes"])}
