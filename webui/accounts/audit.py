from .models import AuditEntry


def client_address(request):
    return request.META.get("REMOTE_ADDR") or None


def record(request, action, target="", **detail):
    user = request.user if request.user.is_authenticated else None
    return AuditEntry.objects.create(
        user=user, username=user.get_username() if user else detail.pop("username", ""),
        address=client_address(request), action=action, target=str(target)[:255],
        detail=detail)
