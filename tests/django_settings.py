"""Settings for the test session: Tusk's own settings with the web tier's configuration
file (tests/web/tusk-test.toml: the PostgreSQL cluster tests/web/conftest.py starts)."""
import os

os.environ.setdefault("TUSK_CONFIG", os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                  "web", "tusk-test.toml"))

from tusk.settings import *  # noqa: E402,F401,F403

# Fast hashing for the many users tests create; the login tests still go through
# Django's real authentication.
# (PBKDF2 stays available for users that a real web process must check).
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher",
                    "django.contrib.auth.hashers.PBKDF2PasswordHasher"]
# A test database of this session's own: two pytest sessions (a developer's and a
# helper's, say) on one machine share the tests' PostgreSQL cluster, never a database.
DATABASES["default"]["TEST"] = {"NAME": f"{DATABASES['default']['NAME']}_test_{os.getpid()}"}  # noqa: F405
