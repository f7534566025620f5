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

from . import commit
from .auth import ADMIN, READ
from .etag import etag, if_match, read_body
from .jobs import accepted
from .schemas import INT_MAX, Document, JobOut, ProblemsOut

router = Router(tags=["policy"])
DOCUMENT = {"type": "object", "additionalProperties": True,
            "description": "The policy file's structure (docs/POLICY.md)"}
BODY = {"requestBody": {"required": True, "content": {
    "application/json": {"schema": DOCUMENT},
    "application/yaml": {"schema": {"type": "string",
                                    "description": "A policy file, as `tusk policy` reads"}}}},
    "parameters": [{"name": "If-Match", "in": "header", "required": True,
                    "description": 'The version read (the ETag of a GET): "<version>"',
                    "schema": {"type": "string", "pattern": r'^(W/)?"[0-9]{1,9}"$'}}]}


class ApplyIn(Schema):
    version: int = Field(ge=1, le=INT_MAX, description="The draft version applied (its ETag): a "
                                           "draft changed since is not applied (409)")
    timeout: int | None = Field(None, ge=CONFIRM_TIMEOUT_MIN, le=CONFIRM_TIMEOUT_MAX,
                                description="Seconds to confirm in, or it rolls back by "
                                            "itself; null: the policy's own setting")


def _document_answer(response, draft):
    response["ETag"] = etag(draft.version)
    return draft.document


@router.get("", response=Document, auth=READ, url_name="policy",
            summary="The policy draft, its version as the ETag", operation_id="policy_get")
def get_policy(request, response: HttpResponse):
    return _document_answer(response, drafts.get())


def _parse(request):
    text = read_body(request, POLICY_MAX_BYTES)
    kind = request.content_type or ""
    if kind in ("application/yaml", "application/x-yaml", "text/yaml"):
        try:
            return parse_yaml(text.decode("utf-8"))
        except UnicodeDecodeError:
            raise PolicyError(Code.SYNTAX, "", "the file is not UTF-8 text") from None
    if kind != "application/json":
        raise PolicyError(Code.SYNTAX, "", f"the body must be application/json or "
                                           f"application/yaml, not {kind or 'untyped'}")
    try:
        return json.loads(text)
    except (UnicodeDecodeError, ValueError) as error:
        raise PolicyError(Code.SYNTAX, "", f"not JSON: {error}") from None


@router.put("", response={200: Document, 409: ProblemsOut, 422: ProblemsOut,
                          428: ProblemsOut}, auth=ADMIN, openapi_extra=BODY,
            summary="Replace the draft whole, at the version in If-Match",
            operation_id="policy_put")
def put_policy(request, response: HttpResponse):
    version = if_match(request)
    document = _parse(request)
    if not isinstance(document, dict):
        raise PolicyError(Code.SYNTAX, "", "the policy must be a mapping (an object)")
    draft = services.replace_draft(request.auth.actor(), document, version)
    return _document_answer(response, draft)


@router.post("/apply", response={202: JobOut, 409: ProblemsOut, 422: ProblemsOut},
             auth=ADMIN, summary="Apply the draft: live and pending until confirmed",
             operation_id="policy_apply")
def apply_policy(request, response: HttpResponse, body: ApplyIn):
    return accepted(response, services.apply_draft(request.auth.actor(), body.version,
                                                   body.timeout))


commit.routes(router, DOMAIN)
