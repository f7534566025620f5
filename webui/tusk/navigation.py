"""The navigation bar, grouped by what an operator comes to do (issue 37): watch the
traffic, configure the box, diagnose a flow, administer the appliance. Each page is in
one group; the page shown - and every page under its address - is marked current."""
import functools

from django.urls import reverse

GROUPS = (
    ("Watch", (("dashboard", "Dashboard"), ("flows", "Flows"), ("logs", "Logs"),
               ("loss", "Loss"))),
    ("Configure", (("policy", "Policy"), ("policy_history", "History"),
                   ("network", "Network"), ("ha", "HA"), ("snmp", "SNMP"),
                   ("tuning", "Tuning"))),
    ("Diagnose", (("diag", "Diagnostics"), ("selftest", "Self-test"), ("tools", "Tools"))),
    ("Administer", (("users", "Users"), ("tokens", "Tokens"), ("metrics", "Metrics"),
                    ("backup", "Backup"), ("system", "System"), ("jobs", "Jobs"),
                    ("audit", "Audit log"))),
)


@functools.cache
def _links():
    """GROUPS with each page's address: the URLconf does not change while a process runs,
    so it is reversed once, not on every page."""
    return [(group, [(reverse(name), label) for name, label in pages])
            for group, pages in GROUPS]


def navigation(request):
    """{"nav": [(group, [(url, label, current)])]}: the current link is the one whose
    address is the longest start of the page's ("/" only for itself)."""
    if not getattr(request, "user", None) or not request.user.is_authenticated:
        return {}
    links = _links()
    path = request.path
    matching = [url for _, pages in links for url, _ in pages
                if path == url or (url != "/" and path.startswith(url))]
    current = max(matching, key=len) if matching else None
    return {"nav": [(group, [(url, label, url == current) for url, label in pages])
                    for group, pages in links]}
