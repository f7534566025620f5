"""`tusk --url URL --token-file FILE policy ...`: the policy commands against a remote box,
through its REST API (docs/API.md), with the output and the exit statuses the same
commands have on the box - so a git repository of policy files plus CI is a
config-as-code workflow:

  check FILE       the box checks the file (its policy engine and its network; no nft -c)
  print FILE       renders here, as on the box
  apply FILE       the draft becomes FILE, then it is applied: pending until confirmed
  confirm, rollback [N], history, diff FILE | --revision N [--revision M], status

Exit status: a problem's code, as on the box (tusk policy's Code: 12 for a reference to
nothing, 24 when nothing awaits confirmation, ...); 1 when the box refuses the call
itself (the token, its scope, its rate: error[UNAUTHORIZED] ...) or cannot be reached;
2 for usage. No Django here: only the standard library and the policy core."""
import argparse
import difflib
import json
import ssl
import sys
import time
import urllib.error
import urllib.request

from tusklib.problems import Problem, report

from .cli import build_parser, read_text
from .core.errors import Code, PolicyError
from .core.normalise import load_policy_file
from .core.render import render

POLL = 0.5
JOB_SECONDS = 300
REMOTE_ONLY_LOCAL = {"recover"}


class Refused(Exception):
    """The box refused the call itself (401, 403, 429, ...) or could not be reached."""

    def __init__(self, problems):
        super().__init__("; ".join(p["message"] for p in problems))
        self.problems = problems


class Box:
    def __init__(self, url, token, ca_file=None):
        self.base = url.rstrip("/") + "/api/v1"
        self.origin = url.rstrip("/")
        self.token = token
        self.context = ssl.create_default_context(cafile=ca_file) if ca_file else None

    def call(self, method, path, body=None, content_type="application/json", headers=None):
        """-> (status, headers, the JSON answer)"""
        data = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            path if path.startswith("http") else self.base + path, data=data, method=method,
            headers={"Authorization": f"Bearer {self.token}", "Accept": "application/json",
                     **({"Content-Type": content_type} if data is not None else {}),
                     **(headers or {})})
        try:
            with urllib.request.urlopen(request, timeout=60, context=self.context) as answer:
                return answer.status, answer.headers, json.loads(answer.read() or b"null")
        except urllib.error.HTTPError as error:
            try:
                problems = json.loads(error.read())["problems"]
            except (ValueError, KeyError, TypeError):
                problems = [{"code": "HTTP", "path": "", "message": f"{error.code} "
                                                                  f"{error.reason}"}]
            return error.code, error.headers, {"problems": problems}
        except (urllib.error.URLError, OSError) as error:
            raise Refused([{"code": "UNREACHABLE", "path": "", "message":
                            f"{self.origin}: {getattr(error, 'reason', error)}"}]) from None

    def ok(self, method, path, body=None, **kwargs):
        """The answer of a call that must succeed; the box's problems raised otherwise."""
        status, headers, answer = self.call(method, path, body, **kwargs)
        if status >= 400:
            raise_problems(answer["problems"])
        return headers, answer

    def job(self, queued):
        """The job once done; its problems raised if it failed."""
        deadline = time.monotonic() + JOB_SECONDS
        job = queued
        while not job["done"]:
            if time.monotonic() > deadline:
                raise Refused([{"code": "TIMEOUT", "path": "", "message":
                                f"job {job['id']} not done in {JOB_SECONDS} s"}])
            time.sleep(POLL)
            _, job = self.ok("GET", self.origin + job["url"])
        if job["state"] != "succeeded":
            raise_problems(job["problems"] or [{"code": "APPLY", "path": "",
                                                "message": job["error"]}])
        return job


def raise_problems(problems):
    """The box's problems as the policy's own error (so its exit status is the code on
    the box), or Refused for what is not a policy problem."""
    found = [Problem(Code[p["code"]], p["path"], p["message"]) for p in problems
             if p["code"] in Code.__members__]
    if found and len(found) == len(problems):
        raise PolicyError(found)
    raise Refused(problems)


def _version(headers):
    return int(headers["ETag"].strip('W/"'))


def cmd_check(box, args):
    box.ok("POST", "/policy/check", read_text(args.file).encode(), content_type="application/yaml")
    print(f"{args.file}: valid")


def cmd_print(box, args):
    sys.stdout.write(render(load_policy_file(args.file)))


def cmd_apply(box, args):
    headers, _ = box.ok("GET", "/policy")
    headers, _ = box.ok("PUT", "/policy", read_text(args.file).encode(),
                        content_type="application/yaml",
                        headers={"If-Match": headers["ETag"]})
    _, queued = box.ok("POST", "/policy/apply", {"version": _version(headers),
                                                 "timeout": args.timeout})
    job = box.job(queued)
    _, state = box.ok("GET", "/policy/state")
    left = state["seconds_left"] if state["pending"] == job["revision"] else 0
    print(f"revision {job['revision']} applied to {box.origin}; it rolls back by itself in "
          f"{left} s unless confirmed with: tusk policy confirm")
    if args.wait:
        _wait_for_decision(box, job["revision"])


def _wait_for_decision(box, revision):
    while True:
        _, state = box.ok("GET", "/policy/state")
        if state["pending"] != revision:
            _, found = box.ok("GET", f"/policy/revisions/{revision}")
            print(f"revision {revision}: {found['outcome']}")
            return
        time.sleep(POLL)


def cmd_confirm(box, args):
    job = box.job(box.ok("POST", "/policy/confirm")[1])
    print(f"revision {job['revision']} confirmed")


def cmd_rollback(box, args):
    if args.revision is None:
        job = box.job(box.ok("POST", "/policy/cancel")[1])
        _, state = box.ok("GET", "/policy/state")
        print(f"revision {job['revision']} rolled back; revision "
              f"{state['confirmed'] or '(none: empty)'} is live again")
        return
    job = box.job(box.ok("POST", "/policy/rollback", {"revision": args.revision})[1])
    _, state = box.ok("GET", "/policy/state")
    print(f"revision {job['revision']} re-applies revision {args.revision}; confirm within "
          f"{state['seconds_left']} s with: tusk policy confirm")


def cmd_history(box, args):
    _, state = box.ok("GET", "/policy/state")
    _, revisions = box.ok("GET", "/policy/revisions?limit=200")
    for revision in revisions:
        live = " *" if revision["number"] == state["confirmed"] else ""
        print(f"{revision['number']:6d}  {revision['created']}  {revision['user']:<12} "
              f"{revision['action']:<16} {revision['outcome']}{live}")


def _ruleset(box, number):
    return box.ok("GET", f"/policy/revisions/{number}")[1]["texts"]["ruleset"] \
        if number else ""


def cmd_diff(box, args):
    if args.revisions:
        ids = args.revisions
        old_id, new_id = (ids[0], ids[1]) if len(ids) == 2 else (ids[0] - 1, ids[0])
        old, new = _ruleset(box, old_id), _ruleset(box, new_id)
        names = (f"revision {old_id}", f"revision {new_id}")
    elif args.file:
        confirmed = box.ok("GET", "/policy/state")[1]["confirmed"]
        old, new = _ruleset(box, confirmed), render(load_policy_file(args.file))
        names = (f"revision {confirmed}" if confirmed else "(empty)", args.file)
    else:
        raise PolicyError(Code.SCHEMA, "", "give a policy FILE or --revision N [--revision M]")
    sys.stdout.write("".join(difflib.unified_diff(old.splitlines(True),
                                                  new.splitlines(True), *names)))


def cmd_status(box, args):
    _, state = box.ok("GET", "/policy/state")
    print(f"target: {box.origin}")
    print(f"confirmed revision: {state['confirmed'] or 'none'}")
    if state["pending"]:
        print(f"pending revision: {state['pending']} (rolls back in {state['seconds_left']} s)")


COMMANDS = {"check": cmd_check, "print": cmd_print, "apply": cmd_apply,
            "confirm": cmd_confirm, "rollback": cmd_rollback, "history": cmd_history,
            "diff": cmd_diff, "status": cmd_status}


def main(argv, url, token_file, ca_file=None):
    args = build_parser().parse_args(argv)     # the same commands and options as on the box
    if args.command in REMOTE_ONLY_LOCAL:
        print(f"tusk policy {args.command} runs on the box itself, not through --url",
              file=sys.stderr)
        return 2
    try:
        with open(token_file, encoding="utf-8") as handle:
            token = handle.read().strip()
    except OSError as error:
        print(f"tusk: cannot read the token file {token_file}: {error.strerror}",
              file=sys.stderr)
        return 2
    box = Box(url, token, ca_file)
    try:
        COMMANDS[args.command](box, args)
    except PolicyError as error:
        return report(error)
    except Refused as refused:
        for problem in refused.problems:
            where = f"{problem['path']}: " if problem["path"] else ""
            print(f"error[{problem['code']}]: {where}{problem['message']}", file=sys.stderr)
        return 1
    return 0


def split_global(argv):
    """tusk's own options before the command: (url, token file, CA file, the rest);
    TUSK_URL, TUSK_TOKEN_FILE and TUSK_CA_FILE in the environment are the defaults."""
    parser = argparse.ArgumentParser(prog="tusk", add_help=False, allow_abbrev=False)
    parser.add_argument("--url")
    parser.add_argument("--token-file")
    parser.add_argument("--ca-file")
    known, rest = parser.parse_known_args(argv)
    return known.url, known.token_file, known.ca_file, rest

