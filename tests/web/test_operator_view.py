"""The operator's view (issue 37): the navigation grouped by task, the current page
marked, and the Policy page's zone-pair matrix - which classes apply from each zone to
each other, in the policy's order, with their hits. In Chromium:
tests/browser/test_navigation.py."""
import html
import re

from policy import draft as drafts
from policy.models import CounterReading
from tusk.navigation import GROUPS

POLICY = """zones:
  - {name: inside, interfaces: [eth1]}
  - {name: outside, interfaces: [eth2]}
  - {name: dmz, interfaces: [eth3]}
services:
  - {name: https, protocol: tcp, ports: [443]}
classes:
  - {name: web, from: inside, to: outside, services: [https], action: accept}
  - {name: to-dmz, to: dmz, action: accept}
  - {name: no-dmz-out, from: dmz, action: drop}
"""


def nav(page):
    """[(group, [(href, label, current)])] of the page's navigation."""
    block = re.search(r'<nav aria-label="Main">(.*?)</nav>', page, re.S).group(1)
    return [(group, [(href, label, bool(current)) for href, current, label in re.findall(
        r'<a href="([^"]+)"( aria-current="page")?>([^<]+)</a>', links)])
            for group, links in re.findall(
                r'<span class="nav-group-name">([^<]+)</span>(.*?)</div>', block, re.S)]


def test_the_navigation_is_grouped_by_task_and_marks_the_current_page(admin_client):
    found = nav(admin_client.get("/policy/classes/").content.decode())
    assert [group for group, _ in found] == ["Watch", "Configure", "Diagnose", "Administer"]
    links = [link for _, pages in found for link in pages]
    assert len(links) == sum(len(pages) for _, pages in GROUPS) == len({h for h, _, _ in links})
    assert [label for _, label, current in links if current] == ["Policy"]
    for href, label, _ in links:
        assert admin_client.get(href).status_code == 200, (href, label)
    current = {path: [label for _, pages in nav(admin_client.get(path).content.decode())
                      for _, label, on in pages if on]
               for path in ("/", "/policy/history/", "/network/", "/accounts/users/")}
    assert current == {"/": ["Dashboard"], "/policy/history/": ["History"],
                       "/network/": ["Network"], "/accounts/users/": ["Users"]}


def test_the_policy_page_draws_the_zone_pair_matrix_with_hits(admin_client, admin_user):
    drafts.import_text(POLICY, admin_user)
    CounterReading.objects.update_or_create(pk=1, defaults={
        "read_at": "2026-11-29T12:00:00Z", "observed_since": "2026-11-29T11:00:00Z",
        "table_loaded": True, "counters": {"class_web": [12300, 1, None]}})
    page = admin_client.get("/policy/").content.decode()
    table = re.search(r'<table class="zone-matrix" id="zone-matrix">(.*?)</table>', page,
                      re.S).group(1)
    assert re.findall(r'<th scope="col">([^<]+)</th>', table) == ["inside", "outside", "dmz"]
    cells = {(row, to): html.unescape(re.sub(r"<[^>]+>", " ", cell)).split()
             for row, body in re.findall(r'<tr data-from="([^"]+)">(.*?)</tr>', table, re.S)
             for to, cell in re.findall(r'<td data-to="([^"]+)">(.*?)</td>', body, re.S)}
    assert cells[("inside", "outside")] == ["web", "accept", "12.3", "k", "pkt"]
    assert cells[("inside", "dmz")] == ["to-dmz", "accept"]
    assert cells[("dmz", "dmz")] == ["to-dmz", "accept", "no-dmz-out", "drop"]
    assert cells[("dmz", "outside")] == ["no-dmz-out", "drop"]
    assert cells[("outside", "inside")] == ["default", "deny"]
    assert len(cells) == 9
    # each class links to its form
    assert '<a href="/policy/classes/2/">no-dmz-out</a>' in table
