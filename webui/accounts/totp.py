"""People's second factor: a TOTP (RFC 6238, pyotp's - never a hand-written HOTP) and ten
recovery codes.

- A code is accepted for the current 30 s step or the one on either side (clocks
  drift), and never twice: the step it matched is recorded by one UPDATE ... WHERE
  last_step < step, so of two logins racing with the same code one wins (RFC 6238
  section 5.2) - and no code of an earlier step works after a later one did.
- Recovery codes are 80 random bits each, shown once and kept as SHA-256 (not guessable,
  so no slow hash is needed), each spent by one UPDATE ... WHERE used_at IS NULL.
- The secret itself is kept as it is (the web process must compute codes from it); the
  database role that reads it reads the password hashes too. docs/SECURITY.md."""
import hashlib
import hmac
import re
import secrets
import time

import pyotp
import segno
from django.db import transaction
from django.utils import timezone

from .models import RecoveryCode, SecondFactor

STEP = 30                 # seconds (RFC 6238's default, what every authenticator app uses)
DIGITS = 6
RECOVERY_CODES = 10
_CODE = re.compile(r"\d{6}")


def issuer(host):
    return f"Tusk {host}".strip()


def begin(user):
    """A new, unconfirmed factor for user (replacing an unconfirmed one; a confirmed one
    stays until the new one is confirmed). -> the SecondFactor"""
    factor, _ = SecondFactor.objects.update_or_create(
        user=user, defaults={"pending_secret": pyotp.random_base32()})
    return factor


def uri(factor, host):
    """The otpauth:// URI of the pending secret, for the authenticator app."""
    return pyotp.TOTP(factor.pending_secret, digits=DIGITS, interval=STEP).provisioning_uri(
        name=factor.user.get_username(), issuer_name=issuer(host))


def qr_svg(text):
    """text as a QR code, an inline SVG element (no style attribute: the CSP allows none)."""
    return segno.make(text, error="m").svg_inline(scale=4, border=4, light="#fff")


def _step(now):
    return int(now // STEP)


def _matching_step(secret, code, now):
    """The step (of now's and its two neighbours) whose code code is, or None."""
    if not _CODE.fullmatch(code or ""):
        return None
    totp = pyotp.TOTP(secret, digits=DIGITS, interval=STEP)
    current = _step(now)
    for step in (current - 1, current, current + 1):
        if hmac.compare_digest(totp.generate_otp(step), code):
            return step
    return None


def verify(user, code, now=None):
    """True when code is user's current TOTP code, unused; it is spent at once."""
    now = time.time() if now is None else now
    factor = SecondFactor.objects.filter(user=user, confirmed_at__isnull=False).first()
    if factor is None:
        return False
    step = _matching_step(factor.secret, code.strip(), now)
    if step is None:
        return False
    return SecondFactor.objects.filter(pk=factor.pk, last_step__lt=step).update(
        last_step=step) == 1


def confirm(user, code, now=None):
    """Confirms the pending secret with a code of it: the new factor replaces any old one
    and a new set of recovery codes replaces the old set. -> the codes, or None."""
    now = time.time() if now is None else now
    with transaction.atomic():
        factor = SecondFactor.objects.select_for_update().filter(user=user).first()
        if factor is None or not factor.pending_secret:
            return None
        step = _matching_step(factor.pending_secret, code.strip(), now)
        if step is None:
            return None
        factor.secret, factor.pending_secret = factor.pending_secret, ""
        factor.confirmed_at, factor.last_step = timezone.now(), step
        factor.save()
        return new_recovery_codes(user)


def enabled(user):
    return user.is_authenticated and SecondFactor.objects.filter(
        user=user, confirmed_at__isnull=False).exists()


def _normal(code):
    return re.sub(r"[\s-]", "", code or "").lower()


def _sha256(code):
    return hashlib.sha256(_normal(code).encode()).hexdigest()


def new_recovery_codes(user):
    """Ten fresh recovery codes for user (the old ones are void). -> their texts"""
    RecoveryCode.objects.filter(user=user).delete()
    codes = []
    for _ in range(RECOVERY_CODES):
        raw = secrets.token_hex(10)             # 80 bits
        codes.append("-".join(raw[i:i + 5] for i in range(0, 20, 5)))
        RecoveryCode.objects.create(user=user, sha256=_sha256(raw))
    return codes


def use_recovery_code(user, code):
    """True when code is one of user's unused recovery codes; it is spent at once."""
    if not re.fullmatch(r"[0-9a-f]{20}", _normal(code)):
        return False
    return RecoveryCode.objects.filter(user=user, sha256=_sha256(code),
                                       used_at__isnull=True).update(
        used_at=timezone.now()) == 1


def recovery_codes_left(user):
    return RecoveryCode.objects.filter(user=user, used_at__isnull=True).count()


def turn_off(user):
    with transaction.atomic():
        SecondFactor.objects.filter(user=user).delete()
        RecoveryCode.objects.filter(user=user).delete()


def check(user, code):
    """A TOTP code or, failing that, a recovery code. -> "totp", "recovery code" or None"""
    if verify(user, code):
        return "totp"
    if use_recovery_code(user, code):
        return "recovery code"
    return None

