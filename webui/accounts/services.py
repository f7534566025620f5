"""The users' operations, called by the Users pages and every other front end alike:
create a user (with a first password they must change), change a user's role and
whether they may log in. The checks are the pages' forms' (accounts/forms.py); a
refusal is a UserError naming the field, or ServiceError FORBIDDEN."""
from enum import IntEnum

from django.contrib.auth import get_user_model
from django.db import transaction

from tusklib.problems import Problem, Problems, Refusal, ServiceError

from . import audit
from .forms import UserCreateForm, UserEditForm
from .models import Profile
from .roles import role_of


class Code(IntEnum):
    """No CLI takes these: the number only keeps the code apart from other domains'."""

    INVALID = 80      # a field the Users form refuses (a taken name, a weak password, ...)


class UserError(Problems):
    codes = Code


def _refused(form):
    return UserError([Problem(Code.INVALID, name if name != "__all__" else "", message)
                      for name, messages in form.errors.items() for message in messages])


def create_user(actor, username, role, password):
    """-> the new user; UserError with the form's problems (a taken name, a weak
    password, ...)."""
    form = UserCreateForm({"username": username, "role": role, "password": password})
    if not form.is_valid():
        raise _refused(form)
    data = form.cleaned_data
    with transaction.atomic():
        user = get_user_model().objects.create_user(data["username"], password=data["password"])
        Profile.objects.create(user=user, role=data["role"], must_change_password=True)
        audit.record_for(actor, "user create", user.get_username(), role=data["role"])
    return user


def edit_user(actor, user, role=None, active=None):
    """user's role and whether they may log in (None: as now). Nobody takes away their own
    admin role or deactivates themselves: another admin must."""
    data = {"role": role if role is not None else role_of(user),
            "active": user.is_active if active is None else active}
    form = UserEditForm({"role": data["role"], **({"active": "on"} if data["active"] else {})})
    if not form.is_valid():
        raise _refused(form)
    if user == actor.user and (form.cleaned_data["role"] != "admin" or not data["active"]):
        raise ServiceError(Refusal.FORBIDDEN, "role", "you cannot take away your own admin "
                                                      "role or deactivate yourself; ask "
                                                      "another admin")
    with transaction.atomic():
        Profile.objects.update_or_create(user=user, defaults={"role": form.cleaned_data["role"]})
        user.is_active = data["active"]
        user.save(update_fields=["is_active"])
        audit.record_for(actor, "user edit", user.get_username(),
                         role=form.cleaned_data["role"], active=data["active"])
    return user
