"""`Authorization: Bearer <token>` on the REST API: a token does what its user can.

Tried before the session: a client that sends a token is answered for that token alone, and a
token that is revoked, mistyped or malformed is a 401 whose one line the remote `div` prints.
A browser without a session sends no token and keeps getting the 403 it always did.
"""

from __future__ import annotations

from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.exceptions import AuthenticationFailed

from telemetry import queries, services

SCHEME = b"bearer"
MALFORMED = "the Authorization header is not Bearer and a token; send Authorization: Bearer <token>"
UNKNOWN_TOKEN = (
    "the server does not know this token (revoked, or mistyped); make a new one with "
    "div token create on the server or on your account page, then div login"
)
INACTIVE = "the token's user is inactive; ask the server's admin to make them active again"


def _words(request) -> list[bytes]:
    return get_authorization_header(request).split()


class BearerTokenAuthentication(BaseAuthentication):
    def authenticate(self, request):
        words = _words(request)
        if not words or words[0].lower() != SCHEME:
            return None  # not ours: the session may still authenticate the request
        if len(words) != 2:
            raise AuthenticationFailed(MALFORMED)
        try:
            text = words[1].decode("ascii")
        except UnicodeDecodeError:
            raise AuthenticationFailed(MALFORMED) from None
        token = queries.token_named(text)
        if token is None:
            raise AuthenticationFailed(UNKNOWN_TOKEN)
        if not token.user.is_active:
            raise AuthenticationFailed(INACTIVE)
        services.token_used(token=token)
        return token.user, token

    def authenticate_header(self, request) -> str | None:
        # A 401 (and how to authenticate) for a client that speaks tokens; None keeps the 403
        # that a request with neither token nor session has always had.
        words = _words(request)
        if words and words[0].lower() == SCHEME:
            return 'Bearer realm="divergent"'
        return None
