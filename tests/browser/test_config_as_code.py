"""Config as code against the browser tier's lab (issue 38): an admin makes a token on the
Tokens page in Chromium; then `tusk --url ... policy` drives the box through its REST API
over HTTPS (nginx, gunicorn, the agent, the lab's firewall) as CI would from a git
repository of policy files - check, apply, confirm, an apply left unconfirmed that rolls
back by itself, history, status - with the output and exit statuses `tusk policy` has on
the box. A stale write is refused with 409; a read token may not apply."""
import json
import re
import ssl
import subprocess
import sys
import urllib.error
import urllib.request

import yaml
from playwright.sync_api import expect
from tuskweb import BROWSER_LAB

from lab.paths import ROOT

TUSK = ROOT / "webui" / "bin" / "tusk"


def make_token(page, url, name, scope):
    page.goto(url + "/accounts/tokens/")
    page.fill("#id_name", name)
    page.select_option("#id_scope", scope)
    page.fill("#id_days", "1")
    page.click("#create-token")
    expect(page.locator("#new-token")).to_be_visible()
    return page.locator("#token-value").inner_text().strip()


class Remote:
    def __init__(self, https, token_file, ca):
        self.https, self.token_file, self.ca = https, token_file, ca

    def tusk(self, *args, token_file=None):
        return subprocess.run([sys.executable, str(TUSK), "--url", self.https, "--token-file",
                               str(token_file or self.token_file), "--ca-file", str(self.ca),
                               "policy", *map(str, args)],
                              capture_output=True, text=True, timeout=400)

    def http(self, method, path, token, body=None, headers=None):
        context = ssl.create_default_context(cafile=str(self.ca))
        request = urllib.request.Request(self.https + "/api/v1" + path, method=method,
                                         data=body, headers={"Authorization": f"Bearer {token}",
                                                             **(headers or {})})
        try:
            with urllib.request.urlopen(request, context=context, timeout=30) as answer:
                return answer.status, answer.headers, json.loads(answer.read())
        except urllib.error.HTTPError as error:
            return error.code, error.headers, json.loads(error.read())


def test_a_policy_repository_drives_the_box_through_the_api(admin, tusk, tmp_path):
    url, _ = tusk
    port = int(url.rsplit(":", 1)[1].strip("/"))
    remote = Remote(f"https://127.0.0.1:{port + 1}", tmp_path / "token",
                    f"/run/tusk-nginx-{BROWSER_LAB}/tusk.crt")   # tools/tusk-lab's
    token = make_token(admin, url, "ci", "admin")
    (tmp_path / "token").write_text(token + "\n")
    reader = tmp_path / "reader"
    reader.write_text(make_token(admin, url, "ci-read", "read"))

    status, headers, live = remote.http("GET", "/policy", token)
    assert status == 200
    original = tmp_path / "policy.yaml"
    original.write_text(yaml.safe_dump(live, sort_keys=False))

    checked = remote.tusk("check", original)
    assert (checked.returncode, checked.stdout) == (0, f"{original}: valid\n"), checked.stderr
    broken = tmp_path / "broken.yaml"
    broken.write_text(yaml.safe_dump({**live, "classes": [
        {**live["classes"][0], "to": "nowhere"}]}, sort_keys=False))
    remote_check = remote.tusk("check", broken)
    on_box = subprocess.run([sys.executable, str(TUSK), "policy", "check", "--no-kernel",
                             str(broken)], capture_output=True, text=True)
    assert remote_check.returncode == on_box.returncode == 12     # REFERENCE
    assert remote_check.stderr == on_box.stderr and "error[REFERENCE]" in on_box.stderr

    refused = remote.tusk("apply", original, token_file=reader)
    assert refused.returncode == 1 and "error[FORBIDDEN]" in refused.stderr

    applied = remote.tusk("apply", original, "--timeout", "300")
    assert applied.returncode == 0, applied.stderr
    first = int(re.fullmatch(
        rf"revision (\d+) applied to {re.escape(remote.https)}; it rolls back by itself in "
        r"\d+ s unless confirmed with: tusk policy confirm\n", applied.stdout).group(1))
    confirmed = remote.tusk("confirm")
    assert (confirmed.returncode, confirmed.stdout) == (0, f"revision {first} confirmed\n")
    nothing = remote.tusk("confirm")
    assert nothing.returncode == 24 and "error[NOT_PENDING]" in nothing.stderr

    # a change nobody confirms: the agent rolls it back by itself at the deadline
    changed = tmp_path / "changed.yaml"
    changed.write_text(yaml.safe_dump({**live, "classes": live["classes"][1:]},
                                      sort_keys=False))
    waited = remote.tusk("apply", changed, "--timeout", "10", "--wait")
    assert waited.returncode == 0, waited.stderr
    second = int(re.match(r"revision (\d+) applied", waited.stdout).group(1))
    assert f"revision {second}: rolled back: not confirmed within 10 s" in waited.stdout
    history = remote.tusk("history").stdout.splitlines()
    assert any(re.match(rf"\s*{first} .* confirmed \*$", line) for line in history), history
    assert any(re.match(rf"\s*{second} .* rolled back", line) for line in history), history
    assert f"confirmed revision: {first}\n" in remote.tusk("status").stdout
    diff = remote.tusk("diff", "--revision", second)
    assert diff.returncode == 0 and diff.stdout.startswith(f"--- revision {second - 1}")

    # the draft moved on since `headers` was read: a write with that version is stale
    status, _, answer = remote.http("PUT", "/policy", token, json.dumps(live).encode(),
                                    {"If-Match": headers["ETag"],
                                     "Content-Type": "application/json"})
    assert status == 409 and answer["problems"][0]["code"] == "STALE"
    # the draft back as it was, for the tests after this one
    _, headers, _ = remote.http("GET", "/policy", token)
    status, _, _ = remote.http("PUT", "/policy", token, original.read_bytes(),
                               {"If-Match": headers["ETag"],
                                "Content-Type": "application/yaml"})
    assert status == 200
    admin.goto(url + "/accounts/audit/")
    expect(admin.locator('[data-token="ci"]').first).to_contain_text("token ci")
