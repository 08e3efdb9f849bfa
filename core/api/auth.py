"""Optional API keys (X-API-Token): no key is anonymous; a key raises the caller's rate limit."""

from __future__ import annotations

from collections.abc import Collection

from django.utils import timezone
from rest_framework import exceptions
from rest_framework.authentication import BaseAuthentication
from rest_framework_api_key.models import APIKey

from core.api.throttling import BadKeyLimit

HEADER = "X-API-Token"
# The challenge of a 401 (RFC 9110, WWW-Authenticate): the scheme and where the key goes.
CHALLENGE = f'ApiKey header="{HEADER}"'


class ApiKeyAuthentication(BaseAuthentication):
    """An unknown key is a 401; a revoked or expired one a 403 (decisions.md).

    Bad keys are rate-limited per client IP before the lookup: a client past RATE_LIMIT_ANON
    bad keys in a window gets 429 without a database query.
    """

    def authenticate(self, request):
        key = request.META.get("HTTP_X_API_TOKEN")
        if key is None:
            return None
        bad_keys = BadKeyLimit(request)
        bad_keys.check()
        prefix, dot, _ = key.partition(".")
        api_key = APIKey.objects.filter(prefix=prefix).first() if dot else None
        if api_key is None or not api_key.is_valid(key):
            bad_keys.record()
            raise exceptions.AuthenticationFailed(f"The API key in {HEADER} is not known.")
        if api_key.revoked:
            bad_keys.record()
            raise exceptions.PermissionDenied(f"The API key in {HEADER} has been disabled.")
        if api_key.has_expired:
            bad_keys.record()
            raise exceptions.PermissionDenied(f"The API key in {HEADER} has expired.")
        return (None, api_key)

    def authenticate_header(self, request) -> str:
        return CHALLENGE


def keys_ended(ids: Collection[str]) -> set[str]:
    """Which of the API keys `ids` a request could no longer use, as ApiKeyAuthentication
    refuses them: disabled (revoked), expired (`has_expired`) or deleted since (one query)."""
    usable = APIKey.objects.get_usable_keys().filter(pk__in=list(ids))
    usable = usable.exclude(expiry_date__lt=timezone.now())  # NULL: never expires
    return set(ids) - set(usable.values_list("pk", flat=True))
