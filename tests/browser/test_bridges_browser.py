"""The Bridges page (issue 39's transparent bridge mode) in Chromium against the browser
lab, whose fw routes between veth-c and veth-s, the ports of the policy's routed zones:
the page explains the bridge mode, and bridging those ports is refused - each problem
next to its field or at the top, naming the ports and the zones - with the draft as it
was. (Bridged traffic itself needs Tusk's kernel: tests/vm/test_bridge.py.)"""
from playwright.sync_api import expect


def test_bridging_the_ports_of_routed_zones_is_refused_by_name(admin, tusk):
    page, url = admin, tusk[0]
    page.goto(url + "/network/bridges/")
    expect(page.locator("#bridge-note")).to_contain_text("fails closed")
    expect(page.locator("#items")).to_contain_text("No bridges")
    page.click("text=Add bridge")
    page.fill("#id_name", "br0")
    page.select_option("#id_members", ["veth-c", "veth-s"])
    page.click("form#item-form button[type=submit]")
    errors = page.locator("ul.errorlist")
    expect(errors.first).to_be_visible()
    shown = " ".join(errors.all_inner_texts())
    assert "veth-c" in shown and "address" in shown, shown
    page.goto(url + "/network/bridges/")
    expect(page.locator("#items")).to_contain_text("No bridges")   # nothing saved
