"""Login throttling by client address: per (user name, address), per address, and a bound
per user name over all addresses; the address is the one nginx saw (X-Real-IP on the unix
socket, where REMOTE_ADDR is empty), never a header a client sent over TCP."""
import pytest
from django.test import override_settings

from accounts.models import AuditEntry, LoginFailure
from tuskweb import make_user

RIGHT, WRONG = "correct horse battery", "wrong"


def login(client, username, password, address):
    """A login as nginx passes it on: through the unix socket, the peer in X-Real-IP."""
    return client.post("/accounts/login/", {"username": username, "password": password},
                       REMOTE_ADDR="", HTTP_X_REAL_IP=address).status_code


@pytest.mark.django_db
@override_settings(LOGIN_FAILURES_ALLOWED=3)
def test_failures_from_one_address_lock_that_address_out_not_the_user(client):
    make_user("admin", "admin")
    for _ in range(3):
        assert login(client, "admin", WRONG, "192.0.2.1") == 200
    assert login(client, "admin", RIGHT, "192.0.2.1") == 429
    assert login(client, "admin", RIGHT, "192.0.2.2") == 302
    assert AuditEntry.objects.get(action="login").address == "192.0.2.2"
    assert set(LoginFailure.objects.values_list("address", flat=True)) == {"192.0.2.1"}


@pytest.mark.django_db
@override_settings(LOGIN_FAILURES_ALLOWED=3)
def test_an_address_guessing_many_user_names_is_locked_out(client):
    make_user("olga", "viewer")
    for n in range(12):   # four times the allowance, each name below its own limit
        assert login(client, f"guess{n % 6}", WRONG, "2001:db8::7") == 200
    assert login(client, "olga", RIGHT, "2001:db8::7") == 429
    assert login(client, "olga", RIGHT, "2001:db8::8") == 302


@pytest.mark.django_db
@override_settings(LOGIN_FAILURES_ALLOWED=3)
def test_guessing_one_name_from_many_addresses_is_bounded(client):
    make_user("admin", "admin")
    for n in range(60):   # twenty times the allowance, each address below its own limit
        assert login(client, "admin", WRONG, f"198.51.100.{n // 2}") == 200
    assert login(client, "admin", RIGHT, "203.0.113.1") == 429


@pytest.mark.django_db
def test_the_address_header_counts_only_on_nginx_socket(client):
    """Over TCP (REMOTE_ADDR set) a client's X-Real-IP is ignored; junk in it is no address."""
    make_user("olga", "viewer")
    client.post("/accounts/login/", {"username": "olga", "password": WRONG},
                REMOTE_ADDR="10.1.1.1", HTTP_X_REAL_IP="192.0.2.66")
    login(client, "olga", WRONG, "not-an-address")
    assert sorted(LoginFailure.objects.values_list("address", flat=True), key=str) == \
        ["10.1.1.1", None]
