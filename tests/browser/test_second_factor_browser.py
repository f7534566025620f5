"""TOTP for people in Chromium (issue 38), on the browser tier's lab (nginx, gunicorn,
the agent): a new user sets up a second factor from its QR page, then logs in with a
code; a wrong code and a code already used are refused; a recovery code logs in once.
Codes come from pyotp with the key the page shows, as an authenticator app computes them.
The admin creates the user, so the other tests' admin logs in with a password alone."""
import re
import time

import pyotp
from playwright.sync_api import expect

FIRST, OWN = "first password 4 tess", "tess keeps two factors"
STEP = 30


def submit(page, code):
    page.fill("#id_code", code)
    page.click("#code-form button[type=submit]")


def log_in(page, url):
    page.goto(url + "/accounts/login/")
    page.fill("#id_username", "tess")
    page.fill("#id_password", OWN)
    page.click("button[type=submit]")
    expect(page).to_have_url(re.compile(r"/accounts/login/code/$"))


def log_out(page):
    page.click("header form button.link")
    expect(page).to_have_url(re.compile(r"/accounts/login/"))


def test_enrol_then_log_in_with_codes_and_a_recovery_code_once(admin, browser, tusk):
    url, _ = tusk
    admin.goto(url + "/accounts/users/new/")
    admin.fill("#id_username", "tess")
    admin.select_option("#id_role", "viewer")
    admin.fill("#id_password", FIRST)
    admin.click("button[type=submit]")
    expect(admin.locator("#users tr[data-user=tess]")).to_contain_text("off")

    context = browser.new_context(ignore_https_errors=True)
    page = context.new_page()
    page.set_default_timeout(15000)
    console = []       # the QR code's inline SVG breaks no Content-Security-Policy rule
    page.on("console", lambda message: console.append(message.text))
    try:
        page.goto(url + "/accounts/login/")
        page.fill("#id_username", "tess")
        page.fill("#id_password", FIRST)
        page.click("button[type=submit]")
        page.fill("#id_old_password", FIRST)
        page.fill("#id_new_password1", OWN)
        page.fill("#id_new_password2", OWN)
        page.click("button[type=submit]")
        expect(page.locator("h1")).to_have_text("Dashboard")

        page.click("text=Second factor")
        page.click("#begin")
        expect(page.locator("#qr svg")).to_be_visible()
        secret = page.locator("#secret").inner_text()
        page.fill("#id_code", pyotp.TOTP(secret).now())
        page.click("#confirm")
        expect(page.locator("#state")).to_contain_text("on")
        codes = page.locator("#codes").inner_text().split()
        assert len(codes) == 10
        log_out(page)

        log_in(page, url)
        near = {pyotp.TOTP(secret).at(time.time() + s) for s in (-30, 0, 30)}
        submit(page, next(f"{n:06d}" for n in range(10 ** 6) if f"{n:06d}" not in near))
        expect(page.locator('[data-field="code"]')).to_contain_text("wrong or was used")
        submit(page, codes[0])
        expect(page.locator("h1")).to_have_text("Dashboard")
        log_out(page)

        log_in(page, url)
        submit(page, codes[0])                       # a recovery code works once
        expect(page.locator('[data-field="code"]')).to_contain_text("wrong or was used")
        code = pyotp.TOTP(secret).at(time.time() + STEP)  # the next 30 s step's: taken now
        submit(page, code)
        expect(page.locator("h1")).to_have_text("Dashboard")
        log_out(page)

        log_in(page, url)
        submit(page, code)                           # a code is taken once
        expect(page.locator('[data-field="code"]')).to_contain_text("wrong or was used")
        assert not [m for m in console if "Content Security Policy" in m], console
    finally:
        context.close()
    admin.goto(url + "/accounts/users/")
    expect(admin.locator("#users tr[data-user=tess]")).to_contain_text("on")
