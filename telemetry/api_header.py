"""Every answer of the REST API says it is div serve's: `Divergent-API: 1`.

The remote `div` reads an answer only when it carries the header (remote.Api.judge), so an
address that answers as something else (another app's `200 {}`, a proxy's or a login portal's
own page) is one line saying so, never an answer misread as div serve's.
"""

from __future__ import annotations

from collections.abc import Callable

HEADER = "Divergent-API"
VERSION = "1"
PREFIX = "/api/"


def marked(get_response: Callable) -> Callable:
    """Middleware: the header on every answer of a view of the API (a path under /api/ that
    no view has is not div serve's API, and is not marked)."""

    def middleware(request):
        response = get_response(request)
        if request.path_info.startswith(PREFIX) and request.resolver_match is not None:
            response[HEADER] = VERSION
        return response

    return middleware
