"""Routing from the Network page (issue 39), in Chromium against the browser lab: BGP with
a TCP MD5 password to a real peer (FRR in the lab's server namespace), applied with
commit-confirm - the Routing page shows the session Established before the change is
confirmed - and the password never shown again once typed."""
import re
import subprocess

from kit import wait_until
from playwright.sync_api import expect
from tuskweb import BROWSER_LAB

from network.core import frr
from network.core.applier import NetworkApplier

FW, SERVER = f"{BROWSER_LAB}-fw", f"{BROWSER_LAB}-server"
STATE = f"/var/tmp/tusk-lab/{BROWSER_LAB}/network"
PASSWORD = "br0wser-md5.key"
PEER = f"""\
frr defaults traditional
router bgp 65010
 bgp router-id 10.10.2.2
 no bgp ebgp-requires-policy
 neighbor 10.10.2.1 remote-as 65001
 neighbor 10.10.2.1 password {PASSWORD}
 address-family ipv4 unicast
  network 10.99.0.0/24
 exit-address-family
exit
"""


def peer_has(peer, prefix):
    result = peer.run("vtysh", "-c", f"show bgp ipv4 unicast {prefix} json")
    return result.returncode == 0 and '"paths"' in result.stdout


def test_bgp_from_the_routing_page_confirmed_once_the_session_is_up(admin, tusk):
    page, url = admin, tusk[0]
    subprocess.run(["ip", "netns", "exec", SERVER, "ip", "addr", "add", "10.99.0.1/24",
                    "dev", "lo"], check=False)
    peer = frr.LabFrr(SERVER)
    peer.apply(PEER, [])
    applier = NetworkApplier(STATE, netns=FW)
    before = applier.confirmed()
    try:
        # the draft as an earlier test left it (a rolled-back change stays in it): thrown
        # away, so that what is applied here is routing only
        page.goto(url + "/network/apply/")
        if page.locator("#discard-draft").count():
            page.click("#discard-draft")
            expect(page.locator("body")).to_contain_text("is the configuration in effect")
        page.goto(url + "/network/routing/")
        page.fill("#id_asn", "65001")
        page.fill("#id_prefixes", "10.10.1.0/24")
        page.click("form#item-form button[type=submit]")
        expect(page.locator("body")).to_contain_text("Saved routing settings in the draft")
        page.click("text=Add BGP neighbour")
        page.fill("#id_address", "10.10.2.2")
        page.fill("#id_remote_as", "65010")
        page.fill("#id_password", PASSWORD)
        page.fill("#id_accept", "10.99.0.0/16")
        page.click("form#item-form button[type=submit]")
        expect(page.locator("#neighbours")).to_contain_text("10.10.2.2")
        expect(page.locator("#neighbours")).to_contain_text("set")
        assert PASSWORD not in page.content()
        page.click("#neighbours >> text=10.10.2.2")
        assert PASSWORD not in page.content()         # nor on its edit form

        page.goto(url + "/network/apply/")
        assert PASSWORD not in page.content()         # nor in the diff
        page.click("#apply")
        expect(page.locator("#network-status")).to_contain_text("is in effect",
                                                                timeout=60000)
        # the agent reads FRR every few seconds: the page shows the session come up
        def established():
            page.goto(url + "/network/routing/")
            sessions = page.locator("#bgp-sessions")
            return sessions.count() and "Established" in sessions.inner_text()
        wait_until(established, 60, "the session Established on the Routing page")
        page.goto(url + "/network/status/")
        page.click("#confirm")
        def confirmed():
            page.goto(url + "/network/status/")
            return "is confirmed and in effect" in page.locator("#network-status").inner_text()
        wait_until(confirmed, 30, "the change confirmed")
        assert applier.confirmed().routing.bgp.neighbours[0].password == PASSWORD
        wait_until(lambda: peer_has(peer, "10.10.1.0/24"), 30, "fw's prefix at the peer")
        routes = subprocess.run(["ip", "netns", "exec", FW, "ip", "route", "show",
                                 "10.99.0.0/24"], capture_output=True, text=True).stdout
        assert re.search(r"10\.99\.0\.0/24 .*proto bgp", routes), routes
    finally:   # the lab as it was: its network without routing, FRR stopped
        if before is not None and applier.store.pending() is not None:
            applier.cancel()
        current = applier.confirmed()
        if current is not None and current.routing.enabled:
            text = open(f"{STATE}/network.toml", encoding="utf-8").read()
            text = text[:text.index("\n[routing]")] + "\n"
            applier.apply(text, timeout=120)
            applier.confirm()
        peer.stop([])
