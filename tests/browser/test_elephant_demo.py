"""make run's lab shows a newcomer an elephant (tools/tusk-lab: 20 s at 1.5 Gbit/s through
bulk-copy, half a minute after the start, then every 5 minutes - every minute at 200
Mbit/s in this tier, conftest.py's ELEPHANT_EVERY and _RATE): on the Flows page it
stands out with its rate over its life and what the box lost while it ran; the Loss page
lists every stage from the lab's fw namespace."""
import re

from playwright.sync_api import expect

ELEPHANT_PORT = 8001


def test_the_labs_elephant_on_the_flows_page_and_the_loss_page(admin):
    page = admin
    page.click("header >> text=Flows")
    expect(page.locator("h1")).to_have_text(re.compile("Flows"))
    # this tier's elephant is a small one (conftest.py's ELEPHANT_RATE): the threshold
    # follows, as an admin sets it
    page.fill("#id_elephant_mbps", "100")
    page.click("#flows-settings button[type=submit]")
    expect(page.locator("#id_elephant_mbps")).to_have_value("100")
    # the first one starts 30 s after the lab, the next a minute after each ends: this
    # waits for one whatever ran before
    row = page.locator(f'#flows-table tr.elephant[data-dport="{ELEPHANT_PORT}"]')
    expect(row).to_have_count(1, timeout=120_000)
    expect(row.locator("td.class")).to_have_text("bulk-copy")
    expect(row.locator("td.life svg.spark polyline")).to_have_count(1, timeout=15_000)
    expect(row.locator("td.life .lost")).to_contain_text(
        re.compile(r"no loss at any stage|lost while it ran"))
    page.click("header >> text=Loss")
    expect(page.locator("h1")).to_have_text("Packet loss")
    expect(page.locator('#loss tr[data-stage="nic.rx_missed@veth-c"]')).to_have_count(1)
    expect(page.locator('#loss tr[data-stage="conntrack.insert_failed"]')).to_have_count(1)
    expect(page.locator('#loss-policy tr[data-reason="default_deny"]')).to_have_count(1)
