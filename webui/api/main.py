"""The API's one NinjaAPI: its routers, its errors (api/errors.py) and the OpenAPI
document at /api/v1/openapi.json (committed as docs/openapi.json: `make openapi`, and
tests/web/test_api_schema.py fails when the two differ). No interactive docs page: it
would load its scripts from a CDN."""
import json

from django.http import Http404
from ninja import NinjaAPI

from . import (
    backup,
    captures,
    errors,
    flows,
    ha,
    jobs,
    logs,
    network,
    policy,
    snmp,
    system,
    tuning,
    users,
)

PROBLEMS = {"content": {"application/json": {"schema": {
    "$ref": "#/components/schemas/ProblemsOut"}}}}
# what any call may answer besides its own statuses, with the problems' shape
COMMON = {"401": "No token or session, or a token that is not valid",
          "403": "The caller's scope or address does not allow this call",
          "429": "Too many calls with this token (Retry-After says when to try again)"}
WITH_INPUT = {"422": "The input's problems, each with the path of its field",
              "413": "The body is larger than this call takes"}


class TuskAPI(NinjaAPI):
    def get_openapi_schema(self, *args, **kwargs):
        """Ninja's document, with the answers every operation may give (COMMON, and
        WITH_INPUT where it takes input) and the ETag of the documents."""
        schema = super().get_openapi_schema(*args, **kwargs)
        for operations in schema["paths"].values():
            for operation in operations.values():
                responses = operation["responses"]
                extra = dict(COMMON)
                parameters = operation.get("parameters") or []
                if parameters or operation.get("requestBody"):
                    extra.update(WITH_INPUT)
                if any(parameter.get("in") == "path" for parameter in parameters):
                    extra["404"] = "No such resource"
                if operation.get("requestBody"):
                    extra["400"] = "The body cannot be parsed as its content type"
                for status, description in extra.items():
                    responses.setdefault(int(status), {"description": description, **PROBLEMS})
        return schema


api = TuskAPI(
    title="Tusk", version="1", urls_namespace="api", docs_url=None,
    openapi_url="/openapi.json",
    description="Everything the dashboard does, for programs (docs/API.md). Authenticate "
                "with a token from the Tokens page (Authorization: Bearer <token>); its "
                "scope (read, operate, admin) says what it may do. Every error is "
                '{"problems": [{"code", "path", "message"}]}.')
api.add_router("/policy", policy.router)
api.add_router("/network", network.router)
api.add_router("/ha", ha.router)
api.add_router("/tuning", tuning.router)
api.add_router("/flows", flows.router)
api.add_router("/logs", logs.router)
api.add_router("/snmp", snmp.router)
api.add_router("/", captures.router)
api.add_router("/", users.router)
api.add_router("/", jobs.router)
api.add_router("/", system.router)
api.add_router("/", backup.router)
errors.install(api)


@api.exception_handler(Http404)
def not_found(request, error):
    return errors.simple(api, request, 404, "No such resource.")


def document():
    """The OpenAPI document as served and committed (docs/openapi.json)."""
    return json.dumps(api.get_openapi_schema(path_prefix="/api/v1"), indent=2,
                      sort_keys=True, ensure_ascii=False) + "\n"


def urls():
    """api.urls, each view open to LoginRequiredMiddleware: the API authenticates every
    call itself (a token or a session, api/auth.py) and answers 401 in its own words."""
    patterns, app_name, namespace = api.urls
    for pattern in patterns:
        pattern.callback.login_required = False
    return patterns, app_name, namespace
