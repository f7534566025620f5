"""The console password: optional; when set, the console menu asks for it before its
shell and before what would get around it (changing it, resetting the web admin's
password). Kept as a Django-compatible PBKDF2 hash, pbkdf2_sha256$<iterations>$<salt>$
<base64 SHA-256>, in console-password beside tusk.toml (/etc/tusk: root only, 0600).

Plain Python, no Django: the console checks it, the System page's form makes it, and
the agent's job system.console_password checks what a job row carries with the same
argument_problem() the form's hash passes through.
"""
import base64
import hashlib
import hmac
import os
import re
import secrets

FILE_NAME = "console-password"
ALGORITHM = "pbkdf2_sha256"
ITERATIONS = 600_000            # OWASP's figure for PBKDF2-HMAC-SHA256
# A row with more would make each try at the console take minutes; fewer, a weak hash.
ITERATIONS_MIN, ITERATIONS_MAX = 100_000, 5_000_000
MIN_LENGTH = 8
CLEAR = "clear"                 # the job argument that removes the password
_HASH = re.compile(rf"{ALGORITHM}\$([0-9]{{1,12}})\$([A-Za-z0-9]{{16,64}})\$"
                   r"([A-Za-z0-9+/]{43}=)")


def path_beside(config_path):
    """Where the password is kept: beside tusk.toml (the agent and the web derive it from
    their configuration's path, never from a job row)."""
    return os.path.join(os.path.dirname(os.path.abspath(config_path)), FILE_NAME)


def make(password, iterations=ITERATIONS):
    salt = secrets.token_hex(11)
    return f"{ALGORITHM}${iterations}${salt}${_digest(password, salt, iterations)}"


def _digest(password, salt, iterations):
    raw = hashlib.pbkdf2_hmac("sha256", password.encode(), salt.encode(), iterations)
    return base64.b64encode(raw).decode("ascii")


def hash_problem(encoded):
    """Why encoded is not a console password hash this module made, or None."""
    if not isinstance(encoded, str):
        return f"must be a string, not {type(encoded).__name__}"
    algorithm = encoded.split("$", 1)[0]
    if algorithm != ALGORITHM:
        return f"algorithm {algorithm[:40]!r} is not {ALGORITHM}"
    found = _HASH.fullmatch(encoded)
    if not found:
        return (f"not {ALGORITHM}$<iterations>$<salt: 16-64 letters and digits>$<base64 "
                "SHA-256> on one line")
    iterations = int(found.group(1))
    if not ITERATIONS_MIN <= iterations <= ITERATIONS_MAX:
        return f"{iterations} iterations is outside {ITERATIONS_MIN}-{ITERATIONS_MAX}"
    return None


def argument_problem(value):
    """The job argument: a hash, or CLEAR."""
    return None if value == CLEAR else hash_problem(value)


def stored(path):
    """The hash kept at path, None when there is none; ValueError naming the problem when
    the file is not one (the console then keeps its shell closed)."""
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as error:
        raise ValueError(f"{path}: unreadable ({error})") from None
    encoded = text[:-1] if text.endswith("\n") else text
    problem = hash_problem(encoded)
    if problem:
        raise ValueError(f"{path}: {problem}")
    return encoded


def verify(password, encoded):
    _, iterations, salt, want = encoded.split("$")
    return hmac.compare_digest(_digest(password, salt, int(iterations)), want)
