"""The image's users on a development machine: created as the Buildroot users table
names them, and granted the way to the interpreter that runs Tusk here, so that the lab
and the tests run each part of Tusk as the user the appliance runs it as."""
import pwd
import subprocess
from pathlib import Path

from lab.paths import USERS_TABLE, WEBUI

WEB_USER, NGINX_USER = "tusk", "tusk-nginx"
ANALYZE_USER = "tusk-analyze"   # the capture analysis sandbox (webui/diag/agent_jobs.py)
ANALYZE_PROBE = f"import sys; sys.path.insert(0, {str(WEBUI)!r}); import diag.cli"
SNMP_USER = "tusk-snmp"   # snmpd after it binds, and its pass_persist (webui/snmp/core)
SNMP_PROBE = f"import sys; sys.path.insert(0, {str(WEBUI)!r}); import snmp.core.passpersist"


def system_users():
    """The image's own users (the Buildroot users table): the web user tusk, nginx's
    tusk-nginx, the capture analyser's tusk-analyze, snmpd's tusk-snmp. PostgreSQL's comes
    with its package."""
    for line in USERS_TABLE.read_text().splitlines():
        if line.strip() and not line.startswith("#") and line.split()[0] != "postgres":
            yield line.split()[0]


def ensure_system_users():
    """Creates the image's users that this machine lacks (ids as the host allots them:
    nothing here outlives the lab)."""
    for user in system_users():
        try:
            pwd.getpwnam(user)
        except KeyError:
            subprocess.run(["useradd", "--system", "--user-group", "--no-create-home",
                            "--home-dir", "/nonexistent", "--shell", "/usr/sbin/nologin", user],
                           check=True, capture_output=True)


def reach_interpreter(python, user, probe, log=print):
    """None once `user` can run `python -c probe`, else why not. The web process and the
    capture analysis (tusk-analyze) run this interpreter; pyenv under /root is out of
    their reach: grant each of them search (x, not read) on the way there."""
    def attempt():
        return subprocess.run(["runuser", "-u", user, "--", python, "-c", probe],
                              capture_output=True, cwd="/")
    if attempt().returncode != 0:
        for parent in reversed(Path(python).resolve().parents):
            grant_search(parent, user, f"so it can run {python}", log)
        done = attempt()
        if done.returncode != 0:
            return f"user {user} cannot run {python}: {done.stderr.decode().strip()}"
    return None


def grant_search(path, user, why, log=print):
    """Search permission (x, not read) for user on path, by ACL, unless it has it."""
    searchable = subprocess.run(["runuser", "-u", user, "--", "test", "-x", str(path)])
    if searchable.returncode != 0:
        log(f"granting user {user} search permission on {path} (ACL u:{user}:x) {why}")
        subprocess.run(["setfacl", "-m", f"u:{user}:x", str(path)], check=True)
