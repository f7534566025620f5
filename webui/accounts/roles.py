"""Who may change things. Every mutating request passes RoleMiddleware, which refuses
viewers everywhere except the few URLs any signed-in user may post to."""
from .models import Role


def role_of(user):
    if not user.is_authenticated:
        return None
    if user.is_superuser:
        return Role.ADMIN
    profile = getattr(user, "profile", None)
    return profile.role if profile else Role.VIEWER


def is_admin(user):
    return role_of(user) == Role.ADMIN
