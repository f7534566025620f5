"""A document's version as its HTTP validator: ETag "<version>" on every read and write,
If-Match required to write (428 without it, 409 when the document moved on - the issue
asks 409 for a stale version, where plain HTTP would say 412), and the body read whole
up to the document's own limit (413 past it), never more."""
import re

from ninja.errors import HttpError

from tusklib.problems import Refusal, ServiceError

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
