"""The policy as one document (docs/API.md): GET it with its version as the ETag, PUT it
whole with If-Match (409 when the draft changed since, 422 with every problem), apply it
(202, a job; pending until confirmed, as in the dashboard), and the commit-confirm kit's
decisions and history (api/commit.py). The document is the policy file's structure
(docs/POLICY.md) as JSON; PUT also takes the file itself as YAML."""
import json

from django.http import HttpResponse
from ninja import Router, Schema
from pydantic import Field

from policy import draft as drafts
from policy import services
from policy.core.constants import CONFIRM_TIMEOUT_MAX, CONFIRM_TIMEOUT_MIN, POLICY_MAX_BYTES
from policy.core.errors import Code, PolicyError
from policy.core.normalise import parse_yaml
from policy.domain import DOMAIN

from . import commit, documents
from .auth import ADMIN, READ
from .documents import read_body
from .jobs import accepted
from .schemas import INT_MAX, JobOut, ProblemsOut

router = Router(tags=["policy"])
POLICY = {"type": "object", "additionalProperties": True,
          "description": "The policy file's structure (docs/POLICY.md)"}
# YAML is the policy file itself, as `tusk policy` reads it (its comments are not kept)
CONTENT = {"application/json": {"schema": POLICY}, "application/yaml": {"schema": POLICY}}


class ApplyIn(Schema):
    version: int = Field(ge=1, le=INT_MAX, description="The draft version applied (its ETag): a "
                                           "draft changed since is not applied (409)")
    timeout: int | None = Field(None, ge=CONFIRM_TIMEOUT_MIN, le=CONFIRM_TIMEOUT_MAX,
                                description="Seconds to confirm in, or it rolls back by "
                                            "itself; null: the policy's own setting")


def _parse(request):
    """The document sent: JSON, or the policy file as YAML (parsed as `tusk policy` does)."""
    text = read_body(request, POLICY_MAX_BYTES)
    kind = request.content_type or ""
    if kind in ("application/yaml", "application/x-yaml", "text/yaml"):
        try:
            document = parse_yaml(text.decode("utf-8"))
        except UnicodeDecodeError:
            raise PolicyError(Code.SYNTAX, "", "the file is not UTF-8 text") from None
    elif kind == "application/json":
        try:
            document = json.loads(text)
        except (UnicodeDecodeError, ValueError) as error:
            raise PolicyError(Code.SYNTAX, "", f"not JSON: {error}") from None
    else:
        raise PolicyError(Code.SYNTAX, "", f"the body must be application/json or "
                                           f"application/yaml, not {kind or 'untyped'}")
    if not isinstance(document, dict):
        raise PolicyError(Code.SYNTAX, "", "the policy must be a mapping (an object)")
    return document


class CheckedOut(Schema):
    valid: bool


@router.post("/check", response={200: CheckedOut, 422: ProblemsOut}, auth=READ,
             openapi_extra={"requestBody": {"required": True, "content": CONTENT}},
             summary="Check a policy document as an apply would (saves nothing)",
             operation_id="policy_check")
def check_policy(request):
    services.check(_parse(request))
    return {"valid": True}


@router.post("/apply", response={202: JobOut, 409: ProblemsOut, 422: ProblemsOut},
             auth=ADMIN, summary="Apply the draft: live and pending until confirmed",
             operation_id="policy_apply")
def apply_policy(request, response: HttpResponse, body: ApplyIn):
    return accepted(response, services.apply_draft(request.auth.actor(), body.version,
                                                   body.timeout))


documents.routes(router, "policy", "policy", drafts.get, services.replace_draft, _parse,
                 CONTENT)
commit.routes(router, DOMAIN)
