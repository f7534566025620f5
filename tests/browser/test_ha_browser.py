"""The HA page in Chromium on make run's whole stack (issue 23, docs/HA.md): the lab's
fw2 runs the secondary's half of a pair beside fw (lab/hapeer.py: its own keepalived
and conntrackd, and its agent's channel, with no dashboard of its own). The operator
makes fw the primary from the page, confirms, sees both roles - fw2, up first, holds the
address; fw joins as backup - then, once fw2's operator has handed the address over,
presses "Fail over now" on fw and sees the roles swap back. Meanwhile the master's
policy reaches the backup (Policy sync: in sync)."""
import re

import pytest
from playwright.sync_api import expect
from tuskweb import BROWSER_LAB

from ha.core.applier import HaApplier
from lab import hapeer

LAB_DIR = f"/var/tmp/tusk-lab/{BROWSER_LAB}"
JOB_MS = 60_000
ROLE_MS = 30_000


def halves():
    return (HaApplier(f"{LAB_DIR}/ha", netns=f"{BROWSER_LAB}-fw"),
            HaApplier(f"{LAB_DIR}/ha-peer/ha", netns=f"{BROWSER_LAB}-fw2"))


@pytest.fixture
def fw_left_master():
    """However the test ends, fw is not left forwarding as backup: its connections would
    be lost to fw2's sync within a minute (docs/HA.md), and the browser tests after this
    one watch the lab's traffic cross fw."""
    yield
    fw, fw2 = halves()
    if fw.role() == "BACKUP" and fw2.role() == "MASTER":
        fw2.fail_over()


def fill(page, segment):
    """This box's half of the lab's pair (lab/hapeer.py), with segment's line."""
    half = hapeer.half("primary")["ha"]
    with open(f"{LAB_DIR}/ha-peer.key", encoding="utf-8") as handle:
        key = handle.read().strip()
    page.select_option("#id_role", "primary")
    page.fill("#id_vrid", str(half["vrid"]))
    page.fill("#id_advert_ms", str(half["advert_ms"]))
    page.fill("#id_sync_interface", half["sync_interface"])
    page.fill("#id_sync_address", half["sync_address"])
    page.fill("#id_peer_address", half["peer_address"])
    page.fill("#id_virtual", segment)
    page.fill("#id_key", key)
    page.click("#ha-apply")


def test_configure_the_pair_see_both_roles_fail_over_and_see_them_swap(admin, fw_left_master):
    page = admin
    page.click("nav >> text=HA")
    expect(page.locator("h1")).to_have_text("High availability")
    fill(page, "ha1 " + hapeer.VIRTUAL)      # a segment fw lacks, first
    # the form refuses it against the box's network configuration (box/verify.py), the
    # field named next to it, and nothing is queued nor pending
    expect(page.locator("#ha-form")).to_contain_text(
        "virtual[0].interface: ha1 (the segment of virtual[0]) is no interface of the "
        "network configuration")
    expect(page).to_have_url(re.compile(r"/ha/$"))
    fill(page, "ha0 " + hapeer.VIRTUAL)
    expect(page).to_have_url(re.compile(r"/ha/$"), timeout=JOB_MS)
    expect(page.locator("#ha-countdown")).to_have_text(re.compile(r"^\d+ s$"))
    page.click("#ha-confirm")
    expect(page).to_have_url(re.compile(r"/ha/$"), timeout=JOB_MS)
    expect(page.locator("#ha-pending")).to_have_count(0)
    # fw2 came up first and holds the address; fw, without preemption, joins as backup
    expect(page.locator("#ha-role")).to_have_text("BACKUP", timeout=ROLE_MS)
    expect(page.locator("#ha-peer-role")).to_have_text("MASTER", timeout=ROLE_MS)
    expect(page.locator("#ha-failover")).to_have_count(0)
    # fw2's operator hands the address over (fw2 has no dashboard in the lab)
    assert halves()[1].fail_over() == "BACKUP"
    expect(page.locator("#ha-role")).to_have_text("MASTER", timeout=ROLE_MS)
    expect(page.locator("#ha-peer-role")).to_have_text("BACKUP", timeout=ROLE_MS)
    # the master's confirmed policy went to fw2 and is confirmed there
    expect(page.locator("#ha-config-sync")).to_have_attribute("data-state", "in sync",
                                                              timeout=ROLE_MS)
    page.click("#ha-failover")
    expect(page).to_have_url(re.compile(r"/ha/$"), timeout=JOB_MS)
    expect(page.locator("#ha-role")).to_have_text("BACKUP", timeout=ROLE_MS)
    expect(page.locator("#ha-peer-role")).to_have_text("MASTER", timeout=ROLE_MS)
    page.click("nav >> text=Dashboard")
    for check in ("HA", "HA peer", "HA policy", "HA sync"):
        expect(page.locator(f'tr[data-check="{check}"] .badge')).to_have_text(
            "ok", timeout=ROLE_MS)
    # fw2 hands the address back: the lab's traffic crosses fw alone, and a box that
    # forwards while it is backup loses its connections to the master's sync (HA.md)
    assert halves()[1].fail_over() == "BACKUP"
    page.click("nav >> text=HA")
    expect(page.locator("#ha-role")).to_have_text("MASTER", timeout=ROLE_MS)
