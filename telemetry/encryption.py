"""Secret values encrypted at rest with Fernet (AES-128-CBC and HMAC-SHA256, from `cryptography`).

The key is DIVERGENT_SECRETS_KEY when it is set, else the file secrets.key in DIVERGENT_HOME,
made the first time a secret is stored, readable by its owner alone. A key that cannot read
what is stored is an error that says so in one line, never "no secrets": a run given no secrets
to mask would show them.
"""

from __future__ import annotations

import binascii
import os
import tempfile
from pathlib import Path

from cryptography.fernet import Fernet, InvalidToken
from django.conf import settings

KEY_ENV = "DIVERGENT_SECRETS_KEY"
KEY_FILE = "secrets.key"
MAKE_ONE = (
    "python -c 'from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())'"
)

BAD_ENV_KEY = (
    f"{KEY_ENV} is not a secrets key (44 characters of URL-safe Base64); make one with: {MAKE_ONE}"
)
BAD_FILE_KEY = (
    "{path} is not a secrets key (44 characters of URL-safe Base64); restore the file the "
    f"secrets were stored with, or set {KEY_ENV}"
)
UNREADABLE_KEY = f"cannot read the secrets key {{path}}: {{why}}; fix it, or set {KEY_ENV}"
UNWRITABLE_KEY = f"cannot make the secrets key {{path}}: {{why}}; set {KEY_ENV} instead"
MISSING_KEY = (
    "the secrets key {path} is missing, and the secrets stored were encrypted with it; restore "
    f"it, set {KEY_ENV} to the key they were stored with, or delete them with div secrets delete "
    "and set them again"
)
WRONG_KEY = (
    "the stored secrets cannot be decrypted with {source}; use the key they were stored with, "
    "or delete them and set them again with div secrets set"
)


class SecretsKeyError(Exception):
    """The key is missing, malformed, or not the one the secrets were stored with."""


def seal(value: str) -> str:
    """The value, encrypted: what the database stores."""
    return _fernet(create=True).encrypt(value.encode("utf-8")).decode("ascii")


def unseal(token: str) -> str:
    """A stored value, decrypted; SecretsKeyError when this key cannot."""
    fernet = _fernet(create=False)
    try:
        return fernet.decrypt(token.encode("ascii")).decode("utf-8")
    except (InvalidToken, UnicodeError) as e:
        raise SecretsKeyError(WRONG_KEY.format(source=key_source())) from e


def key_source() -> str:
    """Where the key comes from, as an error names it."""
    return KEY_ENV if os.environ.get(KEY_ENV) else str(key_path())


def key_path() -> Path:
    return Path(settings.DIVERGENT_HOME) / KEY_FILE


_loaded: dict[tuple[str, str], Fernet] = {}


def _fernet(*, create: bool) -> Fernet:
    text = os.environ.get(KEY_ENV, "")
    path = key_path()
    cached = _loaded.get((text, str(path)))
    if cached is not None:
        return cached
    if text:
        fernet = _parse(text, BAD_ENV_KEY)
    else:
        fernet = _parse(_read_or_make(path, create=create), BAD_FILE_KEY.format(path=path))
    _loaded[(text, str(path))] = fernet
    return fernet


def _parse(text: str, bad: str) -> Fernet:
    try:
        return Fernet(text.strip().encode("ascii"))
    except (ValueError, binascii.Error, UnicodeError):
        raise SecretsKeyError(bad) from None


def _read_or_make(path: Path, *, create: bool) -> str:
    try:
        return path.read_text(encoding="ascii")
    except FileNotFoundError:
        if not create:
            raise SecretsKeyError(MISSING_KEY.format(path=path)) from None
    except (OSError, UnicodeError) as e:
        why = e.strerror if isinstance(e, OSError) and e.strerror else "not text"
        raise SecretsKeyError(UNREADABLE_KEY.format(path=path, why=why.lower())) from None
    try:
        return _make(path)
    except OSError as e:
        why = (e.strerror or str(e)).lower()
        raise SecretsKeyError(UNWRITABLE_KEY.format(path=path, why=why)) from None


def _make(path: Path) -> str:
    """Write a new key where none is, and return whichever key is there then.

    The key is written whole to a file only its owner can read (mkstemp makes it 0600), which
    is then linked into place: no moment when the key is readable by others, or half written,
    and of two processes making one at once, the second link fails and both use the first key.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor, temporary = tempfile.mkstemp(dir=path.parent, prefix=".secrets-key-")
    try:
        with os.fdopen(descriptor, "wb") as f:
            f.write(Fernet.generate_key() + b"\n")
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(temporary, path)
        except FileExistsError:
            pass
    finally:
        os.unlink(temporary)
    return path.read_text(encoding="ascii")
