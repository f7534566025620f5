"""Settings of the Tusk web UI project.

The web UI (pages, database, the privileged agent) arrives with its own issue; for
now the project hosts the policy app, whose core runs without Django or a database.
"""
import os
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent

SECRET_KEY = os.environ.get("TUSK_SECRET_KEY", "")
DEBUG = os.environ.get("TUSK_DEBUG") == "1"
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured("TUSK_SECRET_KEY is not set (or set TUSK_DEBUG=1 for development)")
    SECRET_KEY = "development-only-not-secret"

ALLOWED_HOSTS = ["127.0.0.1", "localhost"]

INSTALLED_APPS = [
    "django.contrib.contenttypes",
    "policy.apps.PolicyConfig",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.middleware.common.CommonMiddleware",
]

ROOT_URLCONF = "tusk.urls"
WSGI_APPLICATION = "tusk.wsgi.application"
DATABASES = {}
USE_TZ = True
TIME_ZONE = "UTC"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
