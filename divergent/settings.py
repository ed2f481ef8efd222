"""One settings file, driven by the environment.

DIVERGENT_HOME   where the SQLite database and runs/run-N/ live (default: ./var in the checkout)
DIVERGENT_URL    the server's public address, like https://div.example.com: the login links
DATABASE_URL     a PostgreSQL database instead of SQLite, e.g. postgres://127.0.0.1/test
REDIS_URL        a Redis channel layer instead of the in-memory one, for several servers
SECRET_KEY       signs sessions and login links; unset, a random key made once in DIVERGENT_HOME
DEBUG            "1" to show Django's debug pages
ALLOWED_HOSTS    comma-separated host names the server answers to
DIVERGENT_SHIP_LIMIT   the most a run's shipped files may weigh (default 100MB; off for none)
DIVERGENT_DB_TIMEOUT   seconds a SQLite write waits for another writer (30); a run's end retries
DIVERGENT_REMOTE_LOST_AFTER   seconds of silence that make a remote client's run lost (120)
DIVERGENT_TOKEN  on a GPU machine, with DIVERGENT_URL: every `div` command talks to that server
                 over its API (telemetry/remote.py reads it; settings need not)

A variable that cannot be read stops start-up with one line naming it (BadSetting).
"""

from __future__ import annotations

import functools
import importlib.util
import math
import os
import secrets
import zoneinfo
from pathlib import Path
from urllib.parse import urlsplit

import dj_database_url
from django.core.exceptions import ImproperlyConfigured
from django.utils.functional import lazy

BASE_DIR = Path(__file__).resolve().parent.parent


class BadSetting(ImproperlyConfigured):
    """An environment variable that cannot be read; str() is the one line to show."""


def env_flag(name: str, default: bool = False) -> bool:
    value = os.environ.get(name)
    if value is None:
        return default
    if value.lower() in ("1", "true", "yes", "on"):
        return True
    if value.lower() in ("0", "false", "no", "off", ""):
        return False
    raise BadSetting(f"{name}={value!r} is not a yes or no; set it to 1 or 0")


def env_url(name: str) -> str | None:
    """An http(s) address without its trailing slash, or None when unset."""
    value = os.environ.get(name) or None
    if value is None:
        return None
    return http_url(name, value)


def http_url(name: str, value: str) -> str:
    """The address without its trailing slash, or BadSetting naming what was wrong (`div login`
    checks the address it is given with the same rule)."""
    try:
        parts = urlsplit(value)  # raises on a bracket left open (http://[::1)
        parts.port  # noqa: B018  (raises on a port that is not a number)
    except ValueError:
        parts = urlsplit("")
    # urlsplit drops a newline or a tab, but the value is printed whole: a link would break.
    spaced = any(c.isspace() or not c.isprintable() for c in value)
    if spaced or parts.scheme not in ("http", "https") or not parts.hostname or parts.query:
        raise BadSetting(
            f"{name}={value!r} is not an http:// or https:// address, like https://div.example.com"
        )
    return value.rstrip("/")


def env_database(name: str) -> dict | None:
    """PostgreSQL or SQLite from a URL, or None when unset. The value is never shown: it may
    hold a password."""
    value = os.environ.get(name)
    if not value:
        return None
    like = "write it like postgres://user@host:5432/db"
    try:
        config = dj_database_url.parse(value, conn_max_age=60)
    except Exception:  # dj-database-url raises several kinds, each meaning a bad URL
        raise BadSetting(f"{name} is not a database URL; {like}") from None
    if config.get("ENGINE") not in DATABASE_ENGINES:
        raise BadSetting(f"{name} is not a PostgreSQL or SQLite URL; {like}")
    if not config.get("NAME"):
        raise BadSetting(f"{name} names no database; {like}")
    return config


DATABASE_ENGINES = ("django.db.backends.postgresql", "django.db.backends.sqlite3")


def env_redis(name: str) -> str | None:
    value = os.environ.get(name) or None
    if value is not None and _scheme(value) not in ("redis", "rediss", "unix"):
        raise BadSetting(f"{name} is not a Redis URL; write it like redis://127.0.0.1:6379/0")
    return value


def _scheme(url: str) -> str:
    try:
        return urlsplit(url).scheme
    except ValueError:  # a bracket left open: no URL at all
        return ""


def env_zone(name: str, default: str) -> str:
    value = os.environ.get(name) or default
    try:
        zoneinfo.ZoneInfo(value)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise BadSetting(f"{name}={value!r} is not a time zone, like UTC or Europe/Paris") from None
    return value


def env_secret_key(name: str):
    """SECRET_KEY, or a random key made once in DIVERGENT_HOME (mode 0600) and kept there, so
    sessions survive a restart and no server signs with a key printed in the source. Read,
    or made, when first used: never by a command that only reads."""
    if os.environ.get(name):
        return os.environ[name]
    return lazy(_home_key, str)()


@functools.cache
def _home_key() -> str:
    from django.conf import settings

    return made_once(
        settings.DIVERGENT_HOME / "secret_key",
        lambda: secrets.token_urlsafe(50),
        advice=(
            "remove it and a new key is made (login links and sessions signed with the old one "
            "stop working), or set SECRET_KEY"
        ),
    )


def made_once(path: Path, make, *, advice: str) -> str:
    """What the file at path says, made (mode 0600) with make() the first time: written aside,
    then linked in, so two processes starting at once keep the same value. A file there that
    cannot be read, or says nothing, is BadSetting naming it, with `advice` on what to do:
    nothing is made over what it may have held."""
    kept = _kept(path, advice)
    if kept is not None:
        return kept
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        draft = path.with_name(f".{path.name}.{os.getpid()}")
        fd = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(make() + "\n")
        try:
            os.link(draft, path)
        except FileExistsError:
            pass
        finally:
            draft.unlink()
    except OSError as e:
        raise BadSetting(
            f"cannot make {path} ({_why(e)}); point DIVERGENT_HOME at a folder this user can write"
        ) from None
    return _kept(path, advice) or ""


def _kept(path: Path, advice: str) -> str | None:
    """The file's value; None when there is no file."""
    try:
        value = path.read_text().strip()
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as e:
        raise BadSetting(f"cannot read {path} ({_why(e)}); {advice}") from None
    if not value:
        raise BadSetting(f"{path} is empty; {advice}")
    return value


def _why(error: Exception) -> str:
    if isinstance(error, OSError) and error.strerror:
        return error.strerror.lower()
    return "not UTF-8 text" if isinstance(error, UnicodeDecodeError) else str(error)


def env_seconds(name: str, default: float) -> float:
    value = os.environ.get(name)
    if not value:
        return default
    try:
        seconds = float(value)
    except ValueError:
        seconds = math.nan
    if not 0 <= seconds < math.inf:  # nan, inf and below zero are no time to wait
        raise BadSetting(f"{name}={value!r} is not a number of seconds; set it like 30")
    return seconds


def env_home(name: str, default: Path) -> Path:
    """The folder, made later by whatever writes there: refused now if a file is in its way."""
    home = Path(os.environ.get(name) or default).resolve()
    for folder in (home, *home.parents):
        if os.path.exists(folder):
            if not os.path.isdir(folder):
                raise BadSetting(
                    f"{name}={str(home)!r} cannot be a folder: {folder} is a file; "
                    f"point {name} at a folder (it is made if missing)"
                )
            break
    return home


DIVERGENT_HOME = env_home("DIVERGENT_HOME", BASE_DIR / "var")
RUNS_DIR = DIVERGENT_HOME / "runs"
DIVERGENT_URL = env_url("DIVERGENT_URL")
# Read when a run ships, where a bad value is one line of `div run` (telemetry/shipping.py).
SHIP_LIMIT = os.environ.get("DIVERGENT_SHIP_LIMIT", "100MB")
# Silence after which a run whose `div` reports over the API (a GPU machine's) shows as lost.
REMOTE_LOST_AFTER = env_seconds("DIVERGENT_REMOTE_LOST_AFTER", 120)

DEBUG = env_flag("DEBUG")
SECRET_KEY = env_secret_key("SECRET_KEY")
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
    "telemetry.api_header.marked",  # Divergent-API on every API answer, whoever made it
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

try:
    _database = env_database("DATABASE_URL")
    DATABASE_ERROR = None
except BadSetting as e:
    # A GPU machine's div (one with a token: telemetry/remote.py) never opens the database, so
    # a DATABASE_URL left in its environment stops only the commands that would: divergent/cli.py
    # says so in one line. Nothing can connect to this engine.
    _database, DATABASE_ERROR = {"ENGINE": "django.db.backends.dummy"}, str(e)
if _database:
    DATABASES = {"default": _database}
else:
    # SQLite creates the file, not its folder: the commands that write make the folder, and
    # one that only reads makes neither (telemetry.commands).
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

if env_redis("REDIS_URL"):
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": [env_redis("REDIS_URL")]},
        }
    }
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
LANGUAGE_CODE = "en-us"
TIME_ZONE = env_zone("TZ", "UTC")
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = DIVERGENT_HOME / "static"
# Plotly.js is served from the copy the plotly package ships: no CDN, works offline.
STATICFILES_DIRS = [
    BASE_DIR / "static",
    ("plotly", Path(importlib.util.find_spec("plotly").origin).parent / "package_data"),
]

# The most of a request body Django reads: a chunk of an upload is at most 1 MiB
# (telemetry/receiving.py), a layout sent to make a run up to 4 MiB, escaped in JSON. daphne
# itself takes a body of any size before Django sees it: limit bodies at the reverse proxy.
DATA_UPLOAD_MAX_MEMORY_SIZE = 8 * 1024 * 1024

LOGIN_URL = "/login/"
LOGIN_REDIRECT_URL = "/"

REST_FRAMEWORK = {
    # A token first: a client that sends one is answered for it alone (telemetry/authentication.py).
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "telemetry.authentication.BearerTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": [
        "telemetry.parsers.TextJSONParser",  # a lone surrogate is a 400, never a 500
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "UNAUTHENTICATED_USER": None,
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {
        "divergent": {"handlers": ["console"], "level": "INFO"},
        # A 500's traceback, in the server's log: with DEBUG off, Django would only mail it to
        # ADMINS, which a self-hosted server has none of. A 404 or 400 (a warning) stays out.
        "django.request": {"handlers": ["console"], "level": "ERROR", "propagate": False},
    },
}


# ---- Served to others: HTTPS and the Content-Security-Policy ----------------------------------
# Kept together, apart from the basics above. DIVERGENT_URL is the address users and `div run`
# reach the server at; over https:// the browser is told to use nothing else for a year (HSTS,
# sent only on HTTPS responses), plain HTTP is redirected, and cookies never travel without TLS.
# includeSubDomains covers only names under the server's own; `preload` is consent to a
# preload list that only the domain's owner can submit it to.
if DIVERGENT_URL is not None and DIVERGENT_URL.lower().startswith("https://"):
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
        raise BadSetting(
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
