"""One settings file, driven by the environment.

DIVERGENT_HOME   where the SQLite database and runs/run-N/ live (default: ./var in the checkout)
DATABASE_URL     a PostgreSQL database instead of SQLite, e.g. postgres://127.0.0.1/test
REDIS_URL        a Redis channel layer instead of the in-memory one, for several servers
SECRET_KEY       required when DEBUG is off
DEBUG            "1" to show Django's debug pages
ALLOWED_HOSTS    comma-separated host names the server answers to
DIVERGENT_SHIP_LIMIT   the most a run's shipped files may weigh (default 100MB; off for none)
DIVERGENT_DB_TIMEOUT   seconds a SQLite write waits for another writer (30); a run's end retries
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


def env_seconds(name: str, default: float) -> float:
    value = os.environ.get(name)
    if not value:
        return default
    try:
        return float(value)
    except ValueError:
        raise ValueError(f"{name}={value!r} is not a number of seconds; set it like 30") from None


DIVERGENT_HOME = Path(os.environ.get("DIVERGENT_HOME") or BASE_DIR / "var").resolve()
RUNS_DIR = DIVERGENT_HOME / "runs"
# Read when a run ships, where a bad value is one line of `div run` (telemetry/shipping.py).
SHIP_LIMIT = os.environ.get("DIVERGENT_SHIP_LIMIT", "100MB")

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
        "timeout": env_seconds("DIVERGENT_DB_TIMEOUT", 30),
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
