from .roles import is_admin, role_of


def role(request):
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {"role": None, "is_admin": False}
    return {"role": role_of(user), "is_admin": is_admin(user)}
