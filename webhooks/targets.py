"""The rules a webhook URL must keep (extensions.md, "Webhooks"): `https` (plain `http` only
where settings.WEBHOOK_ALLOW_HTTP), a public address (unless
settings.WEBHOOK_ALLOW_PRIVATE_HOSTS), port 443 or 80 or one of settings.WEBHOOK_ALLOWED_PORTS,
no credentials. Checked at registration and again at every attempt (core/outbound.py resolves
the host once and the attempt connects to that address)."""

from __future__ import annotations

from django.conf import settings

from core import outbound

NOUN = "webhook URL"
HOST_NOUN = "webhook host"
DEFAULT_PORTS = (443, 80)


def allowed_ports() -> set[int]:
    return {*DEFAULT_PORTS, *settings.WEBHOOK_ALLOWED_PORTS}


def webhook_target(url: str) -> outbound.Target:
    """The URL's parts; OutboundRefused naming the rule it breaks."""
    schemes = ("https", "http") if settings.WEBHOOK_ALLOW_HTTP else ("https",)
    if len(url) > 2000:
        raise outbound.OutboundRefused(f"the {NOUN} is longer than 2000 characters", rule="url")
    target = outbound.target(url, noun=NOUN, schemes=schemes)
    if target.port not in allowed_ports():
        raise outbound.OutboundRefused(
            f"the {NOUN} of {target.origin} names port {target.port}, not one of "
            f"{', '.join(map(str, sorted(allowed_ports())))}",
            rule="port",
        )
    return target


def webhook_address(
    target: outbound.Target, *, deadline: outbound.Deadline | None = None
) -> outbound.Address:
    """The one address the attempt connects to (resolved now, within `deadline`: TimeoutError
    past it); OutboundRefused when the host does not resolve or any address it resolves to is
    not public."""
    return outbound.pinned_address(
        target,
        noun=HOST_NOUN,
        allow_private=settings.WEBHOOK_ALLOW_PRIVATE_HOSTS,
        deadline=deadline,
    )


# What each rule is called in the 422 of a refused registration.
RULES = {
    "url": "a valid URL",
    "host": "a valid host name",
    "scheme": "https only, unless WEBHOOK_ALLOW_HTTP",
    "credentials": "no credentials in the URL",
    "port": "ports 443 and 80, plus WEBHOOK_ALLOWED_PORTS",
    "resolve": "a host that resolves",
    "private_host": "public addresses only, unless WEBHOOK_ALLOW_PRIVATE_HOSTS",
    "redirect": "no redirects",
}


def refusal(exc: outbound.OutboundRefused) -> str:
    """A refusal as the 422 says it: what was wrong, and the rule."""
    return f"url: {exc} (rule: {RULES.get(exc.rule, exc.rule)})"


def webhook_url_check(url: str) -> None:
    """Every rule a URL can be checked against without sending to it; OutboundRefused."""
    webhook_address(webhook_target(url))
