"""Login throttling, against Django's real authentication."""
import pytest
from django.test import override_settings
from tuskweb import make_user

from accounts.models import AuditEntry


@pytest.mark.django_db
def test_login_with_the_right_password(client):
    make_user("olga", "viewer")
    response = client.post("/accounts/login/", {"username": "olga",
                                                "password": "correct horse battery"})
    assert response.status_code == 302
    assert AuditEntry.objects.filter(action="login", username="olga").exists()


@pytest.mark.django_db
@override_settings(LOGIN_FAILURES_ALLOWED=3)
def test_repeated_failures_lock_the_user_name_out_even_with_the_right_password(client):
    make_user("olga", "viewer")
    for _ in range(3):
        response = client.post("/accounts/login/", {"username": "olga", "password": "wrong"})
        assert response.status_code == 200
        assert b"Please enter a correct username and password" in response.content
    response = client.post("/accounts/login/", {"username": "olga",
                                                "password": "correct horse battery"})
    assert response.status_code == 429
    assert b"Too many failed logins" in response.content
    assert "_auth_user_id" not in client.session


@pytest.mark.django_db
@override_settings(LOGIN_FAILURES_ALLOWED=3)
def test_the_lock_is_per_user_name_until_the_address_limit(client):
    make_user("olga", "viewer")
    make_user("paul", "viewer")
    for _ in range(3):
        client.post("/accounts/login/", {"username": "olga", "password": "wrong"})
    response = client.post("/accounts/login/", {"username": "paul",
                                                "password": "correct horse battery"})
    assert response.status_code == 302


@pytest.mark.django_db
def test_a_successful_login_clears_the_failures(client):
    from accounts.models import LoginFailure
    make_user("olga", "viewer")
    client.post("/accounts/login/", {"username": "olga", "password": "wrong"})
    assert LoginFailure.objects.filter(username="olga").count() == 1
    client.post("/accounts/login/", {"username": "olga", "password": "correct horse battery"})
    assert not LoginFailure.objects.filter(username="olga").exists()
