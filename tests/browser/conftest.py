"""The browser tier: the whole of Tusk as `make run` starts it (tools/tusk-lab: its
own PostgreSQL cluster, the lab namespaces, tusk-agent, gunicorn as user tusk, nginx),
driven in Debian's headless Chromium by Playwright - which never downloads a browser
of its own here. A failing test leaves a screenshot and the page's HTML in
tests/artifacts/browser/."""
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from playwright.sync_api import expect

from lab.paths import ROOT, TUSK_LAB

ARTIFACTS = ROOT / "tests" / "artifacts" / "browser"
CHROMIUM = "/usr/bin/chromium"
# test_elephant_demo.py waits for one, not for make run's five minutes; and one that
# leaves the other tests' pages the CPU they need (its Elephant threshold set to match)
ELEPHANT_EVERY, ELEPHANT_RATE = 60, "200M"
from tuskweb import BROWSER_LAB as LAB_NAME  # noqa: E402


@pytest.fixture(scope="session")
def tusk():
    """tools/tusk-lab, up until the tier's last test (pytest_runtest_teardown below), on
    ports it finds free beside any lab of make run's: (base URL, one-time admin
    password). Torn down however the session ends: a test may leave nothing running."""
    if os.geteuid() != 0:
        pytest.fail("the browser tier needs root (tools/tusk-lab: namespaces, PostgreSQL)")
    for tool, package in (("nginx", "nginx"), ("pg_createcluster", "postgresql"),
                          (CHROMIUM, "chromium")):
        if shutil.which(tool) is None:
            pytest.fail(f"missing: {tool} (Debian package {package}) - run `make test`, "
                        "which installs it")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    log = open(ARTIFACTS / "tusk-lab.log", "w")
    proc = subprocess.Popen([sys.executable, str(TUSK_LAB), "--name", LAB_NAME,
                             "--elephant-every", str(ELEPHANT_EVERY),
                             "--elephant-rate", ELEPHANT_RATE],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    password, url = None, None
    deadline = time.monotonic() + 240
    for line in proc.stdout:
        log.write(line)
        log.flush()
        found = re.search(r"one-time password: (\S+)", line)
        if found:
            password = found.group(1)
        if line.startswith("READY "):
            url = line.split()[1].rstrip("/")
            break
        if time.monotonic() > deadline:
            break
    _running.append((proc, log))
    try:
        if url is None or password is None:
            pytest.fail(f"tools/tusk-lab did not come up; see {ARTIFACTS / 'tusk-lab.log'}")
        yield url, password
    finally:
        _stop_lab()


# The lab (its agent, a trickle and an elephant every minute) is torn down after the
# tier's last test, not at the session's end: a whole run goes on to the netns and VM
# tiers for most of an hour, on the same two cores.
_running = []


def _stop_lab():
    """SIGTERM, never SIGKILL: tusk-lab tears down its namespaces and cluster. Once."""
    while _running:
        proc, log = _running.pop()
        proc.send_signal(signal.SIGTERM)
        rest, _ = proc.communicate(timeout=120)
        log.write(rest)
        log.close()


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item, nextitem):
    here = Path(__file__).parent
    if _running and not any(later.path.is_relative_to(here)
                            for later in item.session.items[item.session.items.index(item) + 1:]):
        _stop_lab()


# One Chromium per module, not per session: a live sync_playwright() keeps an asyncio loop
# running in the main thread, and any later test that starts its own (vm/test_appliance.py)
# would be refused by Playwright.
@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"])
        yield browser
        browser.close()


# Every page reports what its Content-Security-Policy blocked (the event fires for each
# refused inline script or style, eval, or resource from elsewhere); none is allowed.
RECORD_CSP_VIOLATIONS = """
window.cspViolations = [];
document.addEventListener("securitypolicyviolation", event => window.cspViolations.push(
    `${event.violatedDirective} blocked ${event.blockedURI || "inline"} in ${event.sourceFile}`
    + `:${event.lineNumber}: ${event.sample}`));
"""


@pytest.fixture
def page(browser, request):
    """A fresh browser context; at the end, no Content-Security-Policy violation may have
    been logged on any page it showed (htmx swaps included)."""
    # the lab's HTTPS certificate is self-signed (test_management.py's management address)
    context = browser.new_context(viewport={"width": 1280, "height": 900},
                                  ignore_https_errors=True)
    context.add_init_script(RECORD_CSP_VIOLATIONS)
    page = context.new_page()
    page.csp_console = []
    page.on("console", lambda message: page.csp_console.append(message.text))
    page.set_default_timeout(15000)
    yield page
    report = getattr(request.node, "report_call", None)
    if report is not None and report.failed:
        name = re.sub(r"[^A-Za-z0-9_.-]", "_", request.node.name)
        page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)
        (ARTIFACTS / f"{name}.html").write_text(page.content())
    console = [m for m in page.csp_console if "Content Security Policy" in m]
    context.close()
    assert console == [], "Content-Security-Policy violations:\n" + "\n".join(console)


NEW_PASSWORD = "elephants never forget 42"


_FIRST_LOGIN_DONE = []   # the lab lives for the session; its first login happens once


@pytest.fixture(scope="module")
def admin_password(tusk, browser):
    """The first login, as a new user makes it: the one-time password, then one's own."""
    if _FIRST_LOGIN_DONE:
        return NEW_PASSWORD
    url, one_time = tusk
    context = browser.new_context()
    page = context.new_page()
    page.goto(url + "/")
    expect(page).to_have_url(re.compile(r"/accounts/login/"))
    page.fill("#id_username", "admin")
    page.fill("#id_password", one_time)
    page.click("button[type=submit]")
    expect(page).to_have_url(re.compile(r"/accounts/password/"))
    expect(page.locator("text=Choose your own password")).to_be_visible()
    page.fill("#id_old_password", one_time)
    page.fill("#id_new_password1", NEW_PASSWORD)
    page.fill("#id_new_password2", NEW_PASSWORD)
    page.click("button[type=submit]")
    expect(page.locator("h1")).to_have_text("Dashboard")
    context.close()
    _FIRST_LOGIN_DONE.append(True)
    return NEW_PASSWORD


@pytest.fixture
def admin(page, tusk, admin_password):
    url, _ = tusk
    page.goto(url + "/accounts/login/")
    page.fill("#id_username", "admin")
    page.fill("#id_password", admin_password)
    page.click("button[type=submit]")
    expect(page.locator("h1")).to_have_text("Dashboard")
    return page


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.when == "call":
        item.report_call = report
