"""One settings file, driven by the environment.

DIVERGENT_HOME   where the SQLite database and runs/run-N/ live (default: ./var in the checkout)
DATABASE_URL     a PostgreSQL database instead of SQLite, e.g. postgres://127.0.0.1/test
REDIS_URL        a Redis channel layer instead of the in-memory one, for several servers
SECRET_KEY       required when DEBUG is off
DEBUG            "1" to show Django's debug pages
ALLOWED_HOSTS    comma-separated host names the server answers to
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import dj_database_url

BASE_DIR = Path(__file__).resolve().parent.parent


def env_flag(name: str, default: bool = False) -> bool:
    value = os.environ.get(name)
    if value is None:
        return default
    if value.lower() in ("1", "true", "yes", "on"):
        return True
    if value.lower() in ("0", "false", "no", "off", ""):
        return False
    raise ValueError(f"{name}={value!r} is not a yes or no; set it to 1 or 0")


DIVERGENT_HOME = Path(os.environ.get("DIVERGENT_HOME") or BASE_DIR / "var").resolve()
RUNS_DIR = DIVERGENT_HOME / "runs"

DEBUG = env_flag("DEBUG")
# The key only signs sessions on this machine; a server facing others sets its own.
SECRET_KEY = os.environ.get("SECRET_KEY") or "divergent-telemetry-local-only-key"
ALLOWED_HOSTS = os.environ.get("ALLOWED_HOSTS", "localhost,127.0.0.1,[::1]").split(",")

INSTALLED_APPS = [
    # Not the default AdminConfig: its autodiscover would import every admin module on every
    # `div` command; urls.py discovers them when a server starts.
    "django.contrib.admin.apps.SimpleAdminConfig",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "channels",
    "telemetry",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "divergent.urls"
WSGI_APPLICATION = "divergent.wsgi.application"
ASGI_APPLICATION = "divergent.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

if os.environ.get("DATABASE_URL"):
    DATABASES = {"default": dj_database_url.parse(os.environ["DATABASE_URL"], conn_max_age=60)}
else:
    # SQLite creates the file, not its folder.
    DIVERGENT_HOME.mkdir(parents=True, exist_ok=True)
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": DIVERGENT_HOME / "divergent.sqlite3",
            "TEST": {"NAME": DIVERGENT_HOME / "test.sqlite3"},
        }
    }
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    DATABASES["default"]["CONN_MAX_AGE"] = 0
    DATABASES["default"]["OPTIONS"] = {
        # WAL lets the server read while the ingester and `div run` write;
        # IMMEDIATE takes the write lock up front, so a busy writer waits instead of failing.
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        "transaction_mode": "IMMEDIATE",
        "timeout": 30,
    }

if os.environ.get("REDIS_URL"):
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": [os.environ["REDIS_URL"]]},
        }
    }
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
LANGUAGE_CODE = "en-us"
TIME_ZONE = os.environ.get("TZ", "UTC")
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = DIVERGENT_HOME / "static"
# Plotly.js is served from the copy the plotly package ships: no CDN, works offline.
STATICFILES_DIRS = [
    BASE_DIR / "static",
    ("plotly", Path(importlib.util.find_spec("plotly").origin).parent / "package_data"),
]

LOGIN_URL = "/login/"
LOGIN_REDIRECT_URL = "/"

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": ["rest_framework.authentication.SessionAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "UNAUTHENTICATED_USER": None,
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {"divergent": {"handlers": ["console"], "level": "INFO"}},
}


# ---- Served to others: HTTPS and the Content-Security-Policy ----------------------------------
# Kept together, apart from the basics above. DIVERGENT_URL is the address users and `div run`
# reach the server at; over https:// the browser is told to use nothing else for a year (HSTS,
# sent only on HTTPS responses), plain HTTP is redirected, and cookies never travel without TLS.
# includeSubDomains covers only names under the server's own; `preload` is consent to a
# preload list that only the domain's owner can submit it to.
DIVERGENT_URL = os.environ.get("DIVERGENT_URL", "")
if DIVERGENT_URL.lower().startswith("https://"):
    SECURE_SSL_REDIRECT = True
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_HSTS_SECONDS = 365 * 24 * 60 * 60
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = True


def proxy_ssl_header(value: str) -> tuple[str, str] | None:
    """ "X-Forwarded-Proto: https" -> ("HTTP_X_FORWARDED_PROTO", "https"), as Django wants it."""
    if not value:
        return None
    name, colon, expected = (part.strip() for part in value.partition(":"))
    if not colon or not name or not expected:
        raise ValueError(
            f"SECURE_PROXY_SSL_HEADER={value!r} is not a header and its value;"
            " set it like X-Forwarded-Proto: https"
        )
    return "HTTP_" + name.upper().replace("-", "_"), expected


# Behind a reverse proxy that ends TLS: the header it sets on every request that came over
# HTTPS (and strips from what clients send), so the redirect does not loop.
SECURE_PROXY_SSL_HEADER = proxy_ssl_header(os.environ.get("SECURE_PROXY_SSL_HEADER", ""))

# Scripts from the app's own static files only: no inline script, no eval, nothing elsewhere.
PLOTLY_EMPTY_STYLE = "'sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU='"  # "": an empty sheet
PLOTLY_MAP_STYLE = "'sha256-ji27qzEtxXZW+7dun6UwjHXJ18e6WAin1VvNtkzIE/o='"  # .maplibregl-map{…
MIDDLEWARE.append("csp.middleware.CSPMiddleware")
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        # Plotly.js adds its own rules to an empty <style> it makes (through the CSSOM, which
        # the policy leaves alone), and the map library it bundles adds one stylesheet as it
        # loads: those two inline styles and no others. tests/test_browser_csp.py fails if a
        # new plotly (pinned in requirements.txt) brings others.
        "style-src": ["'self'", PLOTLY_EMPTY_STYLE, PLOTLY_MAP_STYLE],
        "img-src": ["'self'", "data:"],  # the empty favicon the pages name
        "connect-src": ["'self'"],  # the REST API and the websocket
        "object-src": ["'none'"],
        "base-uri": ["'none'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'none'"],
    }
}
