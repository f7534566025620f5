"""People and what they did: the users (admin: list, create with a first password they
must change at their first login, change a role or whether one may log in) and the
audit log (read), each entry with the token a change came with."""
from datetime import datetime
from typing import Any

from django.contrib.auth import get_user_model
from django.http import HttpResponse
from ninja import Path, Query, Router, Schema, Status
from pydantic import Field

from accounts import services
from accounts.models import AuditEntry, Role, SecondFactor
from accounts.roles import role_of
from tusklib.problems import Refusal, ServiceError

from .auth import ADMIN_STEP_UP, READ
from .schemas import ProblemsOut

router = Router(tags=["users"])
AUDIT_MAX = 500
USERNAME = r"^[A-Za-z0-9_.-]{1,150}$"


class UserOut(Schema):
    username: str
    role: str
    active: bool
    second_factor: bool
    last_login: datetime | None


class UserIn(Schema):
    username: str = Field(pattern=USERNAME)
    role: Role
    password: str = Field(min_length=1, max_length=4096,
                          description="A first password; they choose their own at the "
                                      "first login")


class UserChange(Schema):
    role: Role | None = None
    active: bool | None = None


class AuditOut(Schema):
    at: datetime
    username: str
    token: str = Field(description="The token the change came with; \"\" for a person")
    address: str | None
    action: str
    target: str
    detail: dict[str, Any]


class AuditFilter(Schema):
    action: str | None = Field(None, pattern=r"^[A-Za-z0-9 _.:-]{1,64}$")
    username: str | None = Field(None, pattern=USERNAME)
    token: str | None = Field(None, pattern=r"^[A-Za-z0-9 _.:@/-]{1,64}$")
    limit: int = Field(100, ge=1, le=AUDIT_MAX)


def _out(user):
    return {"username": user.get_username(), "role": role_of(user), "active": user.is_active,
            "second_factor": SecondFactor.objects.filter(
                user=user, confirmed_at__isnull=False).exists(),
            "last_login": user.last_login}


def _user(username):
    found = get_user_model().objects.filter(username=username).first()
    if found is None:
        raise ServiceError(Refusal.NOT_FOUND, "username", f"no user {username}")
    return found


@router.get("/users", response=list[UserOut], auth=ADMIN_STEP_UP, operation_id="users_list",
            summary="The users")
def list_users(request):
    return [_out(user) for user in get_user_model().objects.order_by("username")]


@router.post("/users", response={201: UserOut, 422: ProblemsOut}, auth=ADMIN_STEP_UP,
             operation_id="users_create", summary="Create a user")
def create_user(request, response: HttpResponse, body: UserIn):
    user = services.create_user(request.auth.actor(), body.username, body.role,
                                body.password)
    return Status(201, _out(user))


@router.patch("/users/{username}", response={200: UserOut, 403: ProblemsOut,
                                             404: ProblemsOut, 422: ProblemsOut},
              auth=ADMIN_STEP_UP, operation_id="users_change",
              summary="Change a user's role or whether they may log in")
def change_user(request, body: UserChange,
                username: str = Path(..., pattern=USERNAME)):
    user = services.edit_user(request.auth.actor(), _user(username), body.role, body.active)
    return _out(user)


@router.get("/audit", response=list[AuditOut], auth=READ, operation_id="audit_list",
            summary="The audit log, newest first")
def audit_log(request, filters: Query[AuditFilter]):
    rows = AuditEntry.objects.all()
    for name in ("action", "username", "token"):
        value = getattr(filters, name)
        if value is not None:
            rows = rows.filter(**{name: value})
    return [{"at": e.at, "username": e.username, "token": e.token, "address": e.address,
             "action": e.action, "target": e.target,
             "detail": e.detail if isinstance(e.detail, dict) else {}}
            for e in rows[:filters.limit]]
