"""Settings of the Tusk web UI: fixed here, per device in the configuration file
(tusklib/config.py: TUSK_CONFIG, default /etc/tusk/tusk.toml).

The policy engine's core and the `tusk policy` CLI do not load these settings.
"""
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured
from django.utils.csp import CSP

from tusklib import config as tusk_config

BASE_DIR = Path(__file__).resolve().parent.parent

try:
    TUSK = tusk_config.load()
except tusk_config.ConfigError as exc:
    raise ImproperlyConfigured(str(exc)) from None

SECRET_KEY = TUSK.secret_key
DEBUG = TUSK.debug
ALLOWED_HOSTS = list(TUSK.allowed_hosts)

INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "accounts.apps.AccountsConfig",
    "jobs.apps.JobsConfig",
    "policy.apps.PolicyConfig",
    "dashboard.apps.DashboardConfig",
    "tuning.apps.TuningConfig",
    "diag.apps.DiagConfig",
    "selftest.apps.SelftestConfig",
    "backup.apps.BackupConfig",
    "system.apps.SystemConfig",
    "network.apps.NetworkConfig",
    "ha.apps.HaConfig",
    "logs.apps.LogsConfig",
    "flows.apps.FlowsConfig",
    "snmp.apps.SnmpConfig",
    "metrics.apps.MetricsConfig",
    "api.apps.ApiConfig",
    "tusk.apps.TuskConfig",
]

# The login and role checks come before CSRF's: its check reads request.POST, which would
# parse (and spool) a multipart body of anyone, signed in or not.
MIDDLEWARE = [
    "accounts.middleware.ClientAddressMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "django.middleware.csp.ContentSecurityPolicyMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.auth.middleware.LoginRequiredMiddleware",
    "accounts.middleware.RoleMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "tusk.urls"
WSGI_APPLICATION = "tusk.wsgi.application"

TEMPLATES = [{
    "BACKEND": "django.template.backends.django.DjangoTemplates",
    "DIRS": [BASE_DIR / "templates"],
    "APP_DIRS": True,
    "OPTIONS": {"context_processors": [
        "django.template.context_processors.request",
        "django.contrib.auth.context_processors.auth",
        "django.contrib.messages.context_processors.messages",
        "accounts.context_processors.role",
        "tusk.context.layout",
        "tusk.navigation.navigation",
        "ha.context.pair_role",
    ]},
}]

DATABASES = {"default": {
    "ENGINE": "django.db.backends.postgresql",
    "NAME": TUSK.db_name,
    "USER": TUSK.db_user,
    "PASSWORD": TUSK.db_password,
    "HOST": TUSK.db_host,
    "PORT": str(TUSK.db_port),
    "CONN_MAX_AGE": 60,
    "CONN_HEALTH_CHECKS": True,
    "TEST": {"NAME": f"{TUSK.db_name}_test"},
}}

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator",
     "OPTIONS": {"min_length": 10}},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "dashboard"
LOGOUT_REDIRECT_URL = "login"
# Login throttling (accounts/throttle.py): failures per user name and client - an address,
# an IPv6 one by its /64 - (and multiples of it per client and per name)
LOGIN_FAILURES_ALLOWED = 5
LOGIN_FAILURE_WINDOW = 900  # seconds

SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"
SESSION_COOKIE_AGE = 8 * 3600
CSRF_COOKIE_SAMESITE = "Lax"
X_FRAME_OPTIONS = "DENY"
# Scripts and styles only from our static files: no inline script, style element or
# style attribute anywhere (htmx is told not to inject its indicator style: base.html).
SECURE_CSP = {
    "default-src": [CSP.SELF],
    "script-src": [CSP.SELF],
    "style-src": [CSP.SELF],
    "img-src": [CSP.SELF],
    "object-src": [CSP.NONE],
    "base-uri": [CSP.NONE],
    "form-action": [CSP.SELF],
    "frame-ancestors": [CSP.NONE],
}
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
if TUSK.tls:
    # nginx terminates TLS and says so in X-Forwarded-Proto
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_SSL_REDIRECT = True
    SECURE_REDIRECT_EXEMPT = [r"^healthz/$"]   # the agent's check, on nginx's loopback port
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_HSTS_SECONDS = 31536000
    SECURE_HSTS_INCLUDE_SUBDOMAINS = False
    CSRF_TRUSTED_ORIGINS = [f"https://{host}" for host in ALLOWED_HOSTS]

STATIC_URL = "/static/"
STATIC_ROOT = BASE_DIR / "build" / "static"
STATICFILES_DIRS = [BASE_DIR / "static", BASE_DIR / "build" / "vendor"]

USE_TZ = True
TIME_ZONE = "UTC"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": "INFO"},
    "loggers": {"django.db.backends": {"level": "WARNING"}},
}
