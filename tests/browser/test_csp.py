"""The Content-Security-Policy holds in Chromium: every page an admin can reach (each
parameterless page of the URL list, and one page of every other kind linked from them)
shows with nothing blocked - no inline script or style, no style attribute, nothing
htmx injects - and the policy is the strict one. The `page` fixture (conftest.py) also
fails any browser test whose pages logged a violation: the operator's flows in
test_operator.py, htmx swaps and polling included."""
import urllib.request
from urllib.parse import urlsplit

from django.urls import Resolver404, resolve
from web.test_access import all_routes

# not pages: files to download, fragments only a form posts to, nginx's gate
NOT_PAGES = {"backup_download", "policy_export", "selftest_responder", "diag_download",
             "upload_gate", "healthz", "logout", "metrics_scrape", "metrics_rules",
             "snmp_mib"}
# pages that need their query (a flow's addresses and ports): bare, they refuse with 400
# and say why - which must show with nothing blocked too
NEED_QUERY = {"flows_drop"}


def route_name(path):
    try:
        return resolve(urlsplit(path).path).url_name   # a page's query does not route
    except Resolver404:
        return None


def violations(page):
    return page.evaluate("window.cspViolations || []")


def test_pages_send_a_strict_content_security_policy(tusk):
    url, _ = tusk
    with urllib.request.urlopen(url + "/accounts/login/") as response:
        policy = response.headers["Content-Security-Policy"]
    assert policy is not None, "no Content-Security-Policy header"
    directives = dict(d.strip().split(" ", 1) for d in policy.split(";"))
    assert directives["script-src"] == "'self'" and directives["style-src"] == "'self'"
    assert directives["frame-ancestors"] == "'none'"


def test_every_page_shows_with_nothing_blocked(admin, tusk):
    page = admin
    url, _ = tusk
    queue = ["/" + route for name, route in sorted(set(all_routes()))
             if "<" not in route and name not in NOT_PAGES]
    seen_kinds, visited, blocked = set(), [], {}
    while queue:
        path = queue.pop(0)
        name = route_name(path)
        kind = (name, "<" in path or "?" in path)
        if name is None or name in NOT_PAGES or kind in seen_kinds:
            continue
        seen_kinds.add(kind)
        if page.request.get(url + path).status == 405:   # POST only: no page
            continue
        response = page.goto(url + path)
        expected = 400 if name in NEED_QUERY and "?" not in path else 200
        assert response.status == expected, f"{path}: {response.status}"
        page.wait_for_timeout(300)   # htmx loads, polls and swaps
        visited.append(path)
        if violations(page):
            blocked[path] = violations(page)
        for href in page.eval_on_selector_all("a[href]", "links => links.map(a => a.href)"):
            link = urlsplit(href)
            # with the query: some pages need one (/network/interfaces/edit/?port=...)
            target = link.path + (f"?{link.query}" if link.query else "")
            if link.netloc == urlsplit(url).netloc and target not in visited:
                queue.append(target)
    assert {"/", "/policy/", "/diag/", "/accounts/users/", "/accounts/audit/",
            "/backup/", "/tuning/", "/selftest/", "/jobs/", "/tools/"} <= set(visited)
    assert any(route_name(p) == "policy_item" for p in visited), visited
    assert blocked == {}, blocked

