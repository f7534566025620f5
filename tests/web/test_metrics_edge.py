"""/metrics through the web edge as the image runs it (test_edge.py's nginx and gunicorn):
the bearer token reaches Django through nginx, the client's address is the one recorded,
and plain HTTP is sent to HTTPS before any token is looked at."""
import pytest
from prometheus_client.parser import text_string_to_metric_families
from tuskweb import make_user
from web.test_edge import Client, edge  # noqa: F401  (edge: the module's nginx + gunicorn)

from accounts import tokens
from accounts.models import Token


@pytest.mark.django_db(transaction=True)
def test_a_scrape_through_nginx_takes_the_token_and_records_the_address(edge):  # noqa: F811
    _, token = tokens.create("prometheus", "metrics", make_user("alice", "admin"), 365)
    prometheus = Client(edge, "127.0.0.3")
    status, headers, body = prometheus.request("GET", "/metrics",
                                               headers={"Authorization": f"Bearer {token}"})
    assert status == 200, body
    assert headers["Content-Type"].startswith("text/plain; version=")
    names = {family.name for family in text_string_to_metric_families(body.decode())}
    assert {"tusk_jobs", "tusk_capture_storage_quota_bytes"} <= names
    assert Token.objects.get().last_used_from == "127.0.0.3"

    status, headers, body = prometheus.get("/metrics")
    assert status == 401 and headers["WWW-Authenticate"] == 'Bearer realm="tusk metrics"'
    status, _, _ = prometheus.request("GET", "/metrics",
                                      headers={"Authorization": f"Bearer {token[:-1]}x"})
    assert status == 401
    # the loopback HTTP port: Django sends every URL but /healthz/ to HTTPS, the token unread
    plain = Client(edge, "127.0.0.3", tls=False)
    status, headers, _ = plain.request("GET", "/metrics",
                                       headers={"Authorization": f"Bearer {token}"})
    assert status == 301 and headers["Location"].startswith("https://")
