"""The management address moved from the Network page in Chromium, where other products
lose the operator (issue 18): logged in over https://<fw's management address>/ in the
lab (tools/tusk-lab gives fw a management port and an nginx on it), the operator changes
the address, reviews and applies; the browser is sent to the new address and the change
is confirmed there - and only there: a confirm that arrives over another address is
refused, and a change nobody confirms over the new address rolls back by itself, the
old address answering again.

Each test starts from the address fw has now (the first moves it for the rest of the
session) and moves it to another of the lab's subnet, which this host reaches on the
management port's peer."""
import re
import tomllib

import mgmt_lab
from kit import wait_until
from playwright.sync_api import expect

CONFIRM_TIMEOUT = 30   # the apply form's least (network.core.applier.CONFIRM_TIMEOUT_MIN)


def moving():
    """(fw's management address/length now, another address/length of the subnet)."""
    (current,) = mgmt_lab.addresses()
    lab = mgmt_lab.lab()
    taken = {current.split("/")[0], lab.management_peer_address}
    new = next(str(host) for host in lab.management.hosts() if str(host) not in taken)
    return current, f"{new}/{lab.management.prefixlen}"


def ip(interface):
    return interface.split("/")[0]


def login(page, address, password):
    page.goto(f"https://{address}/accounts/login/")
    page.fill("#id_username", "admin")
    page.fill("#id_password", password)
    page.click("button[type=submit]")
    expect(page.locator("h1")).to_have_text("Dashboard")


def move_management_address(page, old, new, timeout):
    """On the Network page: mgmt's address old -> new in the draft, reviewed, applied;
    the browser ends up at the new address's confirmation page."""
    page.click("nav >> text=Network")
    expect(page.locator("#port-mgmt")).to_contain_text(old)
    page.click("#port-mgmt >> text=Edit")
    expect(page.locator("#id_addresses")).to_have_value(old)
    page.fill("#id_addresses", new)
    page.click("form#item-form button[type=submit]")
    expect(page.locator("#port-mgmt")).to_contain_text(new)
    expect(page.locator("#pending-badge")).to_contain_text("pending changes")

    page.click("text=Review and apply…")
    summary = page.locator("#summary")
    expect(summary).to_contain_text(f"address added: {new} on mgmt")
    expect(summary).to_contain_text(f"address removed: {old} from mgmt")
    expect(page.locator("#management-moves")).to_contain_text(ip(new))
    page.fill("#id_timeout", str(timeout))
    page.click("#apply")
    # the old address goes away while the browser is on it: the page must have sent it on
    expect(page).to_have_url(re.compile(rf"^https://{re.escape(ip(new))}/network/confirm/"
                                        r"\?token="), timeout=30000)
    expect(page.locator("#confirm")).to_be_visible()


def newest_revision_says(page, address, outcome):
    """The newest revision on the Network history page at address has outcome (the
    agent mirrors its store into the database every few seconds: reloaded until then)."""
    def shown():
        page.goto(f"https://{address}/network/history/")
        return outcome in page.locator("table tr").nth(1).inner_text()
    wait_until(shown, 20, f"the newest network revision: {outcome}")


def test_the_management_address_moves_and_is_confirmed_over_the_new_one(page,
                                                                        admin_password):
    old, new = moving()
    login(page, ip(old), admin_password)
    move_management_address(page, old, new, 120)
    assert mgmt_lab.addresses() == [new]                 # in effect, pending
    assert mgmt_lab.answers(ip(new)) == 200 and mgmt_lab.answers(ip(old)) is None

    page.click("#confirm")
    expect(page).to_have_url(re.compile(rf"^https://{re.escape(ip(new))}/"))
    expect(page.locator("#network-status")).to_contain_text("is confirmed and in effect",
                                                            timeout=20000)
    assert mgmt_lab.addresses() == [new]
    confirmed = tomllib.loads(mgmt_lab.NETWORK_TOML.read_text())
    (mgmt,) = [port for port in confirmed["interfaces"] if port["name"] == "mgmt"]
    assert mgmt["addresses"] == [new]
    newest_revision_says(page, ip(new), "confirmed")
    assert mgmt_lab.answers(ip(new)) == 200 and mgmt_lab.answers(ip(old)) is None


def test_a_move_not_confirmed_over_the_new_address_rolls_back(page, admin_password, browser,
                                                              tusk):
    old, new = moving()
    login(page, ip(old), admin_password)
    move_management_address(page, old, new, CONFIRM_TIMEOUT)
    assert mgmt_lab.addresses() == [new]

    # the Confirm button over another address (nginx's loopback listener) proves nothing
    # about the new one: refused, and the change stays pending
    elsewhere = browser.new_context()
    try:
        other = elsewhere.new_page()
        other.goto(tusk[0] + "/accounts/login/")
        other.fill("#id_username", "admin")
        other.fill("#id_password", admin_password)
        other.click("button[type=submit]")
        other.goto(tusk[0] + "/network/status/")
        other.click("#confirm")
        expect(other.locator("#job-state")).to_have_text("failed", timeout=20000)
        expect(other.locator("#job")).to_contain_text("confirm it from the new address")
    finally:
        elsewhere.close()
    assert mgmt_lab.addresses() == [new]

    # nobody confirms over the new address: the old one comes back by itself
    wait_until(lambda: mgmt_lab.addresses() == [old], CONFIRM_TIMEOUT + 30,
               f"fw's management address back to {old}")
    assert mgmt_lab.answers(ip(old)) == 200
    assert mgmt_lab.answers(ip(new)) is None
    confirmed = tomllib.loads(mgmt_lab.NETWORK_TOML.read_text())
    (mgmt,) = [port for port in confirmed["interfaces"] if port["name"] == "mgmt"]
    assert mgmt["addresses"] == [old]
    newest_revision_says(page, ip(old), f"rolled back: not confirmed within {CONFIRM_TIMEOUT} s")
    # the session at the old address is still good: the dashboard is where it was
    page.goto(f"https://{ip(old)}/network/status/")
    expect(page.locator("#network-status")).to_contain_text("is confirmed and in effect")
