"""Login throttling by client address: per (user name, address), per address, and a bound
per user name over all addresses; the address is the one nginx saw (X-Real-IP on the unix
socket, where REMOTE_ADDR is empty), never a header a client sent over TCP.

An IPv6 client is counted by its /64: one host is handed a /64 and may use any address in
it, so counting single addresses gave it 2**64 fresh allowances. And the limits hold for
guesses sent in parallel: each runs in its own thread on its own database connection, as
gunicorn's workers do, and no more of them reach the password check than the limit
allows."""
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.contrib.auth.hashers import make_password
from django.db import connections
from django.test import Client, override_settings
from tuskweb import make_user

from accounts.models import AuditEntry, LoginFailure

RIGHT, WRONG = "correct horse battery", "wrong"


def login(client, username, password, address):
    """A login as nginx passes it on: through the unix socket, the peer in X-Real-IP."""
    return client.post("/accounts/login/", {"username": username, "password": password},
                       REMOTE_ADDR="", HTTP_X_REAL_IP=address).status_code


def logins_at_once(guesses):
    """Each (username, password, address) posted by its own client in its own thread (so on
    its own database connection), all released at the same moment; their status codes."""
    start = threading.Barrier(len(guesses))

    def one(guess):
        try:
            start.wait(timeout=30)
            return login(Client(), *guess)
        finally:
            connections.close_all()

    with ThreadPoolExecutor(len(guesses)) as pool:
        return list(pool.map(one, guesses))


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
        assert login(client, f"guess{n % 6}", WRONG, "2001:db8:7::7") == 200
    assert login(client, "olga", RIGHT, "2001:db8:7::7") == 429
    assert login(client, "olga", RIGHT, "2001:db8:8::7") == 302


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


# -- IPv6: a client is its /64 ---------------------------------------------------------------

@pytest.mark.django_db
@override_settings(LOGIN_FAILURES_ALLOWED=3)
def test_guesses_from_one_ipv6_address_lock_out_its_whole_64_and_no_other(client):
    make_user("admin", "admin")
    for _ in range(3):
        assert login(client, "admin", WRONG, "2001:db8:1::1") == 200
    assert login(client, "admin", RIGHT, "2001:db8:1::2") == 429
    assert login(client, "admin", RIGHT, "2001:db8:1:0:ffff:ffff:ffff:ffff") == 429
    assert login(client, "admin", RIGHT, "2001:db8:2::1") == 302
    # the audit log and the failures keep the address itself, not its network
    assert AuditEntry.objects.get(action="login").address == "2001:db8:2::1"
    assert set(LoginFailure.objects.values_list("address", flat=True)) == {"2001:db8:1::1"}


@pytest.mark.django_db
@override_settings(LOGIN_FAILURES_ALLOWED=3)
def test_an_ipv6_64_guessing_many_names_from_many_addresses_is_locked_out(client):
    make_user("olga", "viewer")
    for n in range(12):   # the address limit, spread over twelve addresses of one /64
        assert login(client, f"guess{n % 6}", WRONG, f"2001:db8:5::{n + 1:x}") == 200
    assert login(client, "olga", RIGHT, "2001:db8:5::ff") == 429
    assert login(client, "olga", RIGHT, "2001:db8:6::ff") == 302


@pytest.mark.django_db
@override_settings(LOGIN_FAILURES_ALLOWED=3)
def test_an_ipv4_mapped_ipv6_address_counts_as_its_ipv4_address(client):
    make_user("admin", "admin")
    for _ in range(3):
        assert login(client, "admin", WRONG, "::ffff:192.0.2.9") == 200
    assert login(client, "admin", RIGHT, "192.0.2.9") == 429
    assert login(client, "admin", RIGHT, "192.0.2.10") == 302


# -- what clears the failures --------------------------------------------------------------

@pytest.mark.django_db
@override_settings(LOGIN_FAILURES_ALLOWED=3)
def test_a_login_without_a_password_does_not_clear_the_failures(client):
    """Only a right password clears an address's failures: a post that checked no password
    (the password left out) must not, or every fourth post could be one and the guessing
    would never stop."""
    make_user("admin", "admin")
    for _ in range(2):
        assert login(client, "admin", WRONG, "192.0.2.5") == 200
    assert login(client, "admin", "", "192.0.2.5") == 200
    assert login(client, "admin", WRONG, "192.0.2.5") == 200
    assert LoginFailure.objects.count() == 3
    assert login(client, "admin", RIGHT, "192.0.2.5") == 429


# -- guesses in parallel ---------------------------------------------------------------------

@pytest.mark.django_db(transaction=True)
@override_settings(LOGIN_FAILURES_ALLOWED=3)
def test_parallel_guesses_from_one_address_check_no_more_passwords_than_allowed():
    """Twenty wrong guesses at once: three are checked against the password (200, the
    invalid-login page), the other seventeen refused unchecked (429). Checked the old way -
    count, check the password, then record - all twenty passed the count before the first
    was recorded. The admin's real hash (PBKDF2, as on the appliance) keeps each check busy
    long enough for the others to arrive, as it would for an attacker."""
    admin = make_user("admin", "admin")
    admin.password = make_password(RIGHT, hasher="pbkdf2_sha256")
    admin.save()
    codes = logins_at_once([("admin", f"{WRONG}{n}", "192.0.2.77") for n in range(20)])
    assert Counter(codes) == {200: 3, 429: 17}
    assert LoginFailure.objects.count() == 3
    assert login(Client(), "admin", RIGHT, "192.0.2.77") == 429
    assert login(Client(), "admin", RIGHT, "192.0.2.78") == 302


@pytest.mark.django_db(transaction=True)
@override_settings(LOGIN_FAILURES_ALLOWED=3)
def test_parallel_guesses_at_many_names_from_one_64_check_no_more_than_its_limit():
    """Thirty names at once from thirty addresses of one /64: its limit (four times the
    allowance, twelve) are checked, whatever the names; the rest are refused unchecked."""
    codes = logins_at_once([(f"guess{n}", WRONG, f"2001:db8:9::{n + 1:x}") for n in range(30)])
    assert Counter(codes) == {200: 12, 429: 18}
    assert LoginFailure.objects.count() == 12


@pytest.mark.django_db(transaction=True)
@override_settings(LOGIN_FAILURES_ALLOWED=3)
def test_failures_recorded_before_the_upgrade_go_on_counting_by_their_network():
    """Rows from before the network column get theirs when it is added (migration 0002)."""
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor
    make_user("admin", "admin")
    MigrationExecutor(connection).migrate([("accounts", "0001_initial")])
    with connection.cursor() as cursor:
        for address in ("2001:db8:3::1", "2001:db8:3::2", "::ffff:192.0.2.3", None):
            cursor.execute("INSERT INTO accounts_loginfailure (username, address, at) "
                           "VALUES ('admin', %s, now())", [address])
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())   # every app: some follow accounts
    assert sorted(LoginFailure.objects.values_list("address", "network"), key=str) == [
        ("2001:db8:3::1", "2001:db8:3::/64"), ("2001:db8:3::2", "2001:db8:3::/64"),
        ("::ffff:192.0.2.3", "192.0.2.3/32"), (None, None)]
    assert login(Client(), "admin", WRONG, "2001:db8:3::3") == 200
    assert login(Client(), "admin", RIGHT, "2001:db8:3::4") == 429
