"""make bench-ui: latency of the dashboard and policy pages and of their htmx fragments
under a short load, with a 1 000-class policy applied - a benchmark, not a test.

Starts Tusk as `make run` does (tools/tusk-lab on its own ports: nginx, gunicorn with
3 workers, the agent sampling every 2 s, background traffic), logs in over HTTP,
imports the 1 000-class policy of bench_policy.py, applies and confirms it through
the UI, then loads each URL with wrk (loopback, BENCH_CONNECTIONS connections,
BENCH_SECONDS each) and prints p50/p95/p99. Baseline, measured in the same run: the
/healthz/ endpoint (the same stack - nginx, gunicorn, Django, one query - with
nothing of Tusk's own on top); ratios are p95 against it.

Goals (issue 4): p95 < 100 ms for pages, < 30 ms for fragments.
"""
import http.cookiejar
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path[:0] = [str(HERE), str(ROOT / "webui"), str(ROOT / "tests")]

from bench_policy import classes_policy  # noqa: E402

SECONDS = int(os.environ.get("BENCH_SECONDS", "10"))
CONNECTIONS = int(os.environ.get("BENCH_CONNECTIONS", "4"))
NAME, HTTP_PORT, PG_PORT = "bench", 8031, 5443
PASSWORD = "benchmark passphrase 1000"
# (label, path, htmx fragment?)
URLS = [
    ("baseline: /healthz/", "/healthz/", None),
    ("dashboard page", "/", False),
    ("policy overview page", "/policy/", False),
    ("traffic classes page (1 000)", "/policy/classes/", False),
    ("revision history page", "/policy/history/", False),
    ("dashboard live fragment", "/dashboard/live/", True),
    ("dashboard health fragment", "/dashboard/health/", True),
    ("policy status fragment", "/policy/status/", True),
    ("traffic classes fragment", "/policy/classes/", True),
]
LUA = """
done = function(summary, latency, requests)
  io.write(string.format('RESULT {"p50": %d, "p95": %d, "p99": %d, "requests": %d, '
    .. '"errors": %d, "non2xx": %d, "seconds": %f}\\n',
    latency:percentile(50), latency:percentile(95), latency:percentile(99),
    summary.requests, summary.errors.connect + summary.errors.read + summary.errors.write
    + summary.errors.timeout, summary.errors.status, summary.duration / 1e6))
end
"""


class Session:
    def __init__(self, base):
        self.base = base
        self.jar = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar))

    def cookie(self, name):
        return next((c.value for c in self.jar if c.name == name), None)

    def get(self, path):
        with self.opener.open(self.base + path) as response:
            return response.geturl(), response.read().decode()

    def post(self, path, fields):
        fields = dict(fields, csrfmiddlewaretoken=self.cookie("csrftoken"))
        request = urllib.request.Request(self.base + path,
                                         data=urllib.parse.urlencode(fields, doseq=True).encode(),
                                         headers={"Referer": self.base + path})
        with self.opener.open(request) as response:
            return response.geturl(), response.read().decode()


def start_lab(name=NAME, http_port=HTTP_PORT, pg_port=PG_PORT):
    """tools/tusk-lab on its own ports: (the process, its URL, the one-time password)."""
    proc = subprocess.Popen([sys.executable, str(ROOT / "tools" / "tusk-lab"), "--name", name,
                             "--http-port", str(http_port), "--pg-port", str(pg_port)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    password = None
    for line in proc.stdout:
        found = re.search(r"one-time password: (\S+)", line)
        if found:
            password = found.group(1)
        if line.startswith("READY "):
            return proc, line.split()[1].rstrip("/"), password
    sys.exit("tools/tusk-lab did not come up")


def wait_for_job(session, url, needle, seconds=120):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        _, page = session.get(urllib.parse.urlparse(url).path)
        if needle in page:
            return page
        if 'id="job-state">failed' in page:
            sys.exit(f"a job failed: {url}")
        time.sleep(0.5)
    sys.exit(f"gave up waiting for {needle!r} at {url}")


def prepare(base, one_time):
    session = Session(base)
    session.get("/accounts/login/")
    session.post("/accounts/login/", {"username": "admin", "password": one_time})
    session.post("/accounts/password/", {"old_password": one_time, "new_password1": PASSWORD,
                                         "new_password2": PASSWORD})
    policy = yaml.safe_dump(classes_policy(1000), sort_keys=False)
    url, _ = session.post("/policy/import/", {"text": policy})
    if not url.endswith("/policy/"):
        sys.exit("importing the 1 000-class policy failed")
    _, page = session.get("/policy/apply/")
    version = re.search(r'name="version" value="(\d+)"', page).group(1)
    url, _ = session.post("/policy/apply/", {"version": version, "timeout": "600"})
    wait_for_job(session, url, 'id="job-state">succeeded')
    url, _ = session.post("/policy/confirm/", {})
    wait_for_job(session, url, 'id="job-state">succeeded')
    return session


def wrk(base, path, session, fragment):
    script = Path("/tmp") / f"tusk-bench-ui-{os.getpid()}.lua"
    script.write_text(LUA)
    argv = ["wrk", "--threads", "2", "--connections", str(CONNECTIONS), "--duration",
            f"{SECONDS}s", "--timeout", "5s", "--script", str(script),
            "--header", f"Cookie: sessionid={session.cookie('sessionid')}"]
    if fragment:
        argv += ["--header", "HX-Request: true"]
    out = subprocess.run(argv + [base + path], capture_output=True, text=True, check=True).stdout
    script.unlink()
    return json.loads(out.split("RESULT ", 1)[1])


def main():
    if subprocess.run(["which", "wrk"], capture_output=True).returncode != 0:
        sys.exit("wrk is missing (Debian package wrk); `make bench-ui` installs it")
    proc, base, one_time = start_lab()
    try:
        session = prepare(base, one_time)
        for _, path, _ in URLS:  # warm every worker's imports and template caches
            for _ in range(6):
                session.get(path)
        rows = [(label, fragment, wrk(base, path, session, fragment))
                for label, path, fragment in URLS]
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(120)
    baseline = rows[0][2]["p95"]
    print(f"Web UI latency under load: wrk, {CONNECTIONS} connections, {SECONDS} s per URL, "
          f"loopback through nginx -> gunicorn (3 workers); 1 000-class policy applied; "
          f"the agent sampling every 2 s")
    print(f"{'URL':34} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8} {'req/s':>8} "
          f"{'p95 x base':>10}  goal")
    for label, fragment, result in rows:
        p95 = result["p95"] / 1000
        goal = "" if fragment is None else (
            f"p95 < {30 if fragment else 100} ms: "
            + ("met" if p95 < (30 if fragment else 100) else "NOT met"))
        bad = f"  ({result['non2xx']} non-2xx, {result['errors']} errors)" \
            if result["non2xx"] or result["errors"] else ""
        print(f"{label:34} {result['p50'] / 1000:8.1f} {p95:8.1f} {result['p99'] / 1000:8.1f} "
              f"{result['requests'] / result['seconds']:8.0f} {result['p95'] / baseline:10.1f}"
              f"  {goal}{bad}")


if __name__ == "__main__":
    main()
