"""make bench-api: latency of the REST API against the same operations through the pages -
a benchmark, not a test.

Starts Tusk as `make run` does (tools/tusk-lab on its own ports: nginx, gunicorn, the
agent sampling every 2 s), logs in, makes an admin token on the Tokens page, puts the
1 000-class policy of bench_policy.py through the API and applies and confirms it, and
fills fw's conntrack table with 10 000 connections (the sampler reads the whole table;
the list keeps the fastest). Then, in rounds, one request of each pair back to back on
kept-alive connections through nginx (so both see the same moment of the box):

  GET the policy         GET /api/v1/policy (JSON)      | GET /policy/export/ (the page's YAML)
  PUT the policy         PUT /api/v1/policy (YAML body) | POST /policy/import/ (its form)
  list flows             GET /api/v1/flows              | GET /flows/table/ (the page's list)
  baseline               GET /healthz/ (nginx, gunicorn, Django, one query: nothing of Tusk's)

It prints p50/p95 of each and the per-round ratio API / page as a geometric mean with a
95 % bootstrap interval (tests/bench/paired.py): below 1 the API is the faster.
"""
import http.client
import json
import os
import re
import signal
import statistics
import sys
import time
import urllib.parse
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path[:0] = [str(HERE), str(ROOT / "webui"), str(ROOT / "tests"), str(ROOT)]

from bench_policy import classes_policy  # noqa: E402
from bench_ui import start_lab  # noqa: E402
from paired import mean_ci  # noqa: E402

from flows.core import ctnetlink as nl  # noqa: E402
from flows.core.conntrack import Conntrack  # noqa: E402

NAME, HTTP_PORT, PG_PORT = "benchapi", 8041, 5444
PASSWORD = "benchmark passphrase 1000"
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "200"))
PUT_ROUNDS = int(os.environ.get("BENCH_PUT_ROUNDS", "20"))
CONNECTIONS = 10_000


class Client:
    """One kept-alive HTTP connection to the lab, with cookies."""

    def __init__(self, port, headers=None):
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        self.headers = dict(headers or {})
        self.cookies = {}

    def request(self, method, path, body=None, headers=None):
        all_headers = {**self.headers, **(headers or {})}
        if self.cookies:
            all_headers["Cookie"] = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        started = time.perf_counter()
        self.conn.request(method, path, body=body, headers=all_headers)
        response = self.conn.getresponse()
        content = response.read()
        elapsed = time.perf_counter() - started
        for cookie in response.headers.get_all("Set-Cookie") or []:
            name, _, rest = cookie.partition("=")
            self.cookies[name] = rest.split(";", 1)[0]
        return response.status, response.headers, content, elapsed

    def form(self, path, fields):
        body = urllib.parse.urlencode(dict(fields, csrfmiddlewaretoken=self.cookies[
            "csrftoken"])).encode()
        return self.request("POST", path, body, {
            "Content-Type": "application/x-www-form-urlencoded",
            "Referer": f"http://127.0.0.1:{HTTP_PORT}{path}"})


def job_done(api, job, seconds=300):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        _, _, body, _ = api.request("GET", job["url"])
        found = json.loads(body)
        if found["done"]:
            if found["state"] != "succeeded":
                sys.exit(f"job {found['id']} failed: {found['error']}")
            return found
        time.sleep(0.5)
    sys.exit(f"job {job['id']} not done in {seconds} s")


def prepare(one_time):
    page = Client(HTTP_PORT)
    page.request("GET", "/accounts/login/")
    page.form("/accounts/login/", {"username": "admin", "password": one_time})
    page.form("/accounts/password/", {"old_password": one_time, "new_password1": PASSWORD,
                                      "new_password2": PASSWORD})
    status, _, body, _ = page.form("/accounts/tokens/", {"name": "bench", "scope": "admin",
                                                         "days": 1})
    token = re.search(r'<pre id="token-value">([^<]+)</pre>', body.decode())
    if status != 201 or token is None:
        sys.exit(f"could not make a token ({status})")
    api = Client(HTTP_PORT, {"Authorization": f"Bearer {token.group(1)}"})
    policy = yaml.safe_dump(classes_policy(1000), sort_keys=False).encode()
    _, headers, _, _ = api.request("GET", "/api/v1/policy")
    status, headers, body, _ = api.request("PUT", "/api/v1/policy", policy, {
        "Content-Type": "application/yaml", "If-Match": headers["ETag"]})
    if status != 200:
        sys.exit(f"PUT of the 1 000-class policy: {status} {body[:300]}")
    version = int(headers["ETag"].strip('"'))
    for path, args in (("/api/v1/policy/apply", {"version": version, "timeout": 600}),
                       ("/api/v1/policy/confirm", None)):
        _, _, body, _ = api.request("POST", path, json.dumps(args or {}).encode(),
                                    {"Content-Type": "application/json"})
        job_done(api, json.loads(body))
    return page, api, policy


def fill_conntrack(netns):
    with Conntrack(netns) as conntrack:
        for start in range(0, CONNECTIONS, 256):
            conntrack.create(b"".join(
                nl.new_entry(conntrack.next_seq(), nl.Tuple(
                    f"10.10.{1 + (i >> 8 & 127)}.{i & 255}", "10.10.2.2", 6,
                    20000 + (i % 40000), 5201))
                for i in range(start, min(start + 256, CONNECTIONS))))


def percentile(values, q):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def measure(rounds, pair):
    """pair() -> (api seconds, page seconds, baseline seconds) of one round."""
    return [pair() for _ in range(rounds)]


def main():
    proc, _, one_time = start_lab(NAME, HTTP_PORT, PG_PORT)
    try:
        page, api, policy = prepare(one_time)
        fill_conntrack(f"{NAME}-fw")
        time.sleep(6)    # the sampler's next whole pass over the table
        baseline = Client(HTTP_PORT)
        ok = (200, 302)

        def timed(client, method, path, body=None, headers=None):
            status, _, _, elapsed = client.request(method, path, body, headers)
            if status not in ok:
                sys.exit(f"{method} {path}: {status}")
            return elapsed

        def get_pair():
            return (timed(api, "GET", "/api/v1/policy"), timed(page, "GET", "/policy/export/"),
                    timed(baseline, "GET", "/healthz/"))

        def put_pair():
            _, headers, _, _ = api.request("GET", "/api/v1/policy")
            api_seconds = timed(api, "PUT", "/api/v1/policy", policy, {
                "Content-Type": "application/yaml", "If-Match": headers["ETag"]})
            status, _, _, page_seconds = page.form("/policy/import/",
                                                   {"text": policy.decode()})
            if status not in ok:
                sys.exit(f"POST /policy/import/: {status}")
            return api_seconds, page_seconds, timed(baseline, "GET", "/healthz/")

        def flows_pair():
            return (timed(api, "GET", "/api/v1/flows"), timed(page, "GET", "/flows/table/"),
                    timed(baseline, "GET", "/healthz/"))

        for pair in (get_pair, flows_pair):      # warm every worker
            measure(10, pair)
        _, _, body, _ = api.request("GET", "/api/v1/flows")
        entries = json.loads(body)["entries"]
        rows = [("GET the policy (1 000 classes)", measure(ROUNDS, get_pair)),
                ("PUT the policy (1 000 classes)", measure(PUT_ROUNDS, put_pair)),
                (f"list flows ({entries} connections)", measure(ROUNDS, flows_pair))]
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(120)
    print(f"REST API against the pages: sequential requests on kept-alive connections through "
          f"nginx -> gunicorn, API and page back to back in each round ({ROUNDS} rounds; "
          f"{PUT_ROUNDS} for PUT); baseline /healthz/ in the same rounds")
    print("| operation | API p50 ms | API p95 ms | page p50 ms | page p95 ms | API / page "
          "(95 % CI) | API p50 / baseline p50 |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for label, rounds in rows:
        api_s, page_s, base_s = zip(*rounds)
        mean, low, high = mean_ci([a / p for a, p, _ in rounds])
        print(f"| {label} | {1000 * statistics.median(api_s):.1f} | "
              f"{1000 * percentile(api_s, 0.95):.1f} | {1000 * statistics.median(page_s):.1f} | "
              f"{1000 * percentile(page_s, 0.95):.1f} | x{mean:.2f} ({low:.2f}-{high:.2f}) | "
              f"x{statistics.median(api_s) / statistics.median(base_s):.1f} |")


if __name__ == "__main__":
    main()
