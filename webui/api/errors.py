"""Every refusal the API answers, as one shape ({"problems": [...]}, api/schemas.py) and
the HTTP status that says what kind it is - the one place a front end's errors are made
from the services' (as firewalld's decorator does for D-Bus):

  422  the input's problems (a domain's Problems, or the request's own shape)
  404 / 409 / 403  a ServiceError: not found, stale or conflicting, forbidden
  401 / 403 / 429  the token or the session (api/auth.py)
  413  a body over its limit"""
from django.core.exceptions import RequestDataTooBig
from ninja.errors import AuthenticationError, HttpError, ValidationError

from tusklib.problems import Problems, Refusal, ServiceError

from .auth import REALM, TokenRefused

STATUS = {Refusal.NOT_FOUND: 404, Refusal.STALE: 409, Refusal.CONFLICT: 409,
          Refusal.FORBIDDEN: 403}
HTTP_CODES = {400: "BAD_REQUEST", 401: "UNAUTHORIZED", 403: "FORBIDDEN", 404: "NOT_FOUND",
              405: "METHOD_NOT_ALLOWED", 409: "CONFLICT", 413: "TOO_LARGE",
              415: "UNSUPPORTED_MEDIA_TYPE", 428: "PRECONDITION_REQUIRED",
              429: "TOO_MANY_REQUESTS"}


def problem(code, path, message):
    return {"code": code, "path": path, "message": message}


def answer(api, request, status, problems, headers=None):
    response = api.create_response(request, {"problems": problems}, status=status)
    for name, value in (headers or {}).items():
        response[name] = value
    return response


def simple(api, request, status, message, headers=None):
    return answer(api, request, status,
                  [problem(HTTP_CODES.get(status, str(status)), "", message)], headers)


def _path(location):
    """pydantic's loc, ("body", "payload", "timeout"), as a problem's path: "timeout"."""
    parts = [part for part in location if part not in ("body", "query", "path", "header",
                                                       "payload", "filters")]
    path = ""
    for part in parts:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    return path


def install(api):
    """The exception handlers of api (a NinjaAPI)."""

    @api.exception_handler(ServiceError)
    def service_error(request, error):
        return answer(api, request, STATUS[error.code], problems_of(error))

    @api.exception_handler(Problems)
    def problems(request, error):
        return answer(api, request, 422, problems_of(error))

    @api.exception_handler(ValidationError)
    def invalid(request, error):
        return answer(api, request, 422, [
            problem("INVALID", _path(item.get("loc", ())), item.get("msg", "invalid"))
            for item in error.errors])

    @api.exception_handler(TokenRefused)
    def token_refused(request, error):
        refused = error.refused
        return simple(api, request, refused.status, refused.message, refused.headers(REALM))

    @api.exception_handler(AuthenticationError)
    def unauthenticated(request, error):
        return simple(api, request, 401, "A token (Authorization: Bearer <token>) or a "
                                         "dashboard session is needed.",
                      {"WWW-Authenticate": f'Bearer realm="{REALM}"'})

    @api.exception_handler(HttpError)
    def http_error(request, error):
        return simple(api, request, error.status_code, str(error))

    @api.exception_handler(RequestDataTooBig)
    def too_big(request, error):
        return simple(api, request, 413, "The body is larger than this call takes.")


def problems_of(error):
    """A domain's Problems exception as the API's problems."""
    return [problem(p.code.name, p.path, p.message) for p in error.problems]
