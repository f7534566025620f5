"""A configuration as one document, read and written whole (the policy, the network):
its version is its HTTP validator - ETag "<version>" on every read and write, If-Match
required to write (428 without it, 409 when the document moved on: the issue asks 409
for a stale version, where plain HTTP would say 412) - and the body is read whole up to
the document's own limit (413 past it), never more. routes() adds a domain's GET and PUT."""
import re

from django.http import HttpResponse
from ninja.errors import HttpError

from tusklib.problems import Refusal, ServiceError

from .auth import ADMIN, READ
from .schemas import Document, ProblemsOut

_TAG = re.compile(r'\s*(?:W/)?"(\d{1,9})"\s*')


def etag(version):
    return f'"{version}"'


def if_match(request):
    """The version If-Match names."""
    header = request.headers.get("If-Match")
    if header is None:
        raise HttpError(428, 'Send the version you read as If-Match: "<version>" (the '
                             "ETag of your GET): a write without it could undo a change "
                             "made since.")
    match = _TAG.fullmatch(header)
    if match is None:
        raise ServiceError(Refusal.STALE, "If-Match", f"{header[:40]!r} is not a version "
                                                      'this document had ("<number>")')
    return int(match.group(1))


def read_body(request, limit):
    """The request's body, at most limit bytes (else 413)."""
    try:
        length = int(request.headers.get("Content-Length") or 0)
    except ValueError:
        length = 0
    if length > limit:
        raise HttpError(413, f"The body is {length} bytes; at most {limit} are taken.")
    body = request.read(limit + 1)
    if len(body) > limit:
        raise HttpError(413, f"The body is over {limit} bytes.")
    return body


IF_MATCH = {"name": "If-Match", "in": "header", "required": True,
            "description": 'The version read (the ETag of a GET): "<version>"',
            "schema": {"type": "string", "pattern": r'^(W/)?"[0-9]{1,9}"$'}}


def routes(router, name, what, draft, replace, parse, content, shown=None):
    """GET and PUT of a domain's draft on router: draft() -> the Draft (.document,
    .version); replace(actor, document, version) -> the Draft saved, or the domain's
    problems / ServiceError STALE; parse(request) -> the document sent; content: the
    request body's OpenAPI content (media type -> schema); shown(document) -> the
    document as answered (secrets hidden; a PUT of it keeps them)."""

    def answer(response, found):
        response["ETag"] = etag(found.version)
        return shown(found.document) if shown else found.document

    @router.get("", response=Document, auth=READ, operation_id=f"{name}_get",
                summary=f"The {what} draft, its version as the ETag")
    def get_document(request, response: HttpResponse):
        return answer(response, draft())

    @router.put("", response={200: Document, 409: ProblemsOut, 422: ProblemsOut,
                              428: ProblemsOut}, auth=ADMIN, operation_id=f"{name}_put",
                summary="Replace the draft whole, at the version in If-Match",
                openapi_extra={"requestBody": {"required": True, "content": content},
                               "parameters": [IF_MATCH]})
    def put_document(request, response: HttpResponse):
        version = if_match(request)
        return answer(response, replace(request.auth.actor(), parse(request), version))
