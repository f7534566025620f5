"""The REST API tested from its own OpenAPI document (schemathesis, on Hypothesis):
for every operation, generated input - valid and not - through the whole Django stack
and the test database, as an admin token: no answer is a server error, and every answer
matches the document (status, content type, body schema, headers)."""
import pytest
import schemathesis
from django.core import signals
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from hypothesis import HealthCheck
from hypothesis import settings as examples
from schemathesis.config import SchemathesisConfig

from accounts import tokens
from accounts.models import Scope

# A write without If-Match is 428 Precondition Required (RFC 6585), the status made for it
CONFIG = SchemathesisConfig.from_dict(
    {"checks": {"missing_required_header": {"expected-statuses": [428]}}})
schema = schemathesis.openapi.from_wsgi("/api/v1/openapi.json", get_wsgi_application(),
                                        config=CONFIG)


@pytest.fixture
def admin_token(admin_user, settings):
    """An admin token, and the WSGI handler kept from closing the test's database
    connection after each call (as Django's test client keeps it)."""
    settings.TOKEN_CALLS_PER_MINUTE = 100_000
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    yield tokens.create("schemathesis", Scope.ADMIN, admin_user, 1)[1]
    signals.request_started.connect(close_old_connections)
    signals.request_finished.connect(close_old_connections)


@schema.parametrize()
@examples(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@pytest.mark.django_db(transaction=False)
def test_no_input_makes_the_api_fail_or_stray_from_its_document(case, admin_token):
    # every check but "a schema-valid request is accepted": a policy document's schema
    # is an object (or a YAML text), and the policy engine, not the schema, says whether
    # it is a policy (422 with its problems)
    case.call_and_validate(headers={"Authorization": f"Bearer {admin_token}"},
                           excluded_checks=[schemathesis.checks.positive_data_acceptance])
