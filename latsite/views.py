"""Pages that are not API resources: the error docs, the OpenAPI pages, health and version, the
catch-all 404 and the CSRF failure page. Outside /admin/ each answers its errors in the JSON error
body."""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Sequence
from functools import wraps

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.views import csrf
from django.views.decorators.cache import cache_control
from django.views.decorators.csrf import csrf_exempt
from drf_spectacular.utils import OpenApiResponse, extend_schema
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerView
from rest_framework import serializers
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.throttling import BaseThrottle
from rest_framework.views import APIView

from core import release, telemetry
from core.api.errors import ERROR_CODES, handler404, json_error, method_not_allowed
from core.api.renderers import JSONRenderer
from core.api.schema import error_responses
from core.middleware import is_admin_path
from core.networks import allowed_networks
from lats.telemetry import SyncStatusCollector
from sync import health
from webhooks.telemetry import WebhookQueueCollector

READ_METHODS = ["GET", "HEAD"]


def read_only(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """GET and HEAD only; any other method is a JSON 405 `bad_request` (Django's require_GET
    answers an empty HTML 405). CSRF-exempt: these pages change nothing, so a POST to them is a
    405 rather than Django's CSRF failure page."""

    @wraps(view)
    def inner(request: HttpRequest, *args, **kwargs) -> HttpResponse:
        if request.method not in READ_METHODS:
            return method_not_allowed(request, READ_METHODS)
        return view(request, *args, **kwargs)

    return csrf_exempt(inner)


@read_only
@cache_control(max_age=3600, public=True)
def error_docs(request: HttpRequest) -> HttpResponse:
    codes = [
        {"code": code, "status": status, "title": title, "when": when}
        for code, (status, title, when) in ERROR_CODES.items()
    ]
    return render(request, "docs/errors.html", {"codes": codes})


@read_only
def docs_index(request: HttpRequest) -> HttpResponse:
    return render(request, "docs/index.html")


def metrics_allowed(address: str | None, entries: Sequence[str]) -> bool:
    """Whether a client at `address` may read the metrics: it lies in one of `entries` (IPs or
    CIDRs). An IPv4 address mapped into IPv6 (a server bound to ::) counts as the IPv4 one."""
    try:
        ip = ipaddress.ip_address((address or "").strip().strip("[]").split("%")[0])
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return any(ip in network for network in allowed_networks(entries))


@read_only
def prometheus_metrics(request: HttpRequest) -> HttpResponse:
    """The Prometheus exposition (README, "Monitoring"), for METRICS_ALLOWED_IPS only.

    The client address is the one the rate limits see: REMOTE_ADDR, or X-Forwarded-For as
    NUM_PROXIES trusted proxies set it. A plain Django view: not in the OpenAPI schema, and
    not throttled (scrapes must not eat a client's budget)."""
    address = BaseThrottle().get_ident(Request(request))
    if not metrics_allowed(address, settings.METRICS_ALLOWED_IPS):
        return json_error("forbidden", "The metrics are not served to this address.", 403)
    body = telemetry.exposition([SyncStatusCollector(), WebhookQueueCollector()])
    return HttpResponse(body, content_type=telemetry.CONTENT_TYPE)


class JsonErrorsMixin:
    """drf-spectacular's views render with YAML, OpenAPI-JSON or HTML renderers, which would
    render an error (405, 429) as YAML or an HTML page: render errors as JSON instead."""

    def handle_exception(self, exc):
        response = super().handle_exception(exc)
        self.request.accepted_renderer = JSONRenderer()
        self.request.accepted_media_type = JSONRenderer.media_type
        return response


class SchemaView(JsonErrorsMixin, SpectacularAPIView):
    pass


class SwaggerView(JsonErrorsMixin, SpectacularSwaggerView):
    pass


class RedocView(JsonErrorsMixin, SpectacularRedocView):
    pass


# --- health and version (sync/health.py) -----------------------------------------------------

_CHECK_STATUS = "`ok` when it answered, `down` when it did not"


class HealthDependencySerializer(serializers.Serializer):
    status = serializers.ChoiceField(["ok", "down"], help_text=_CHECK_STATUS + ".")
    error = serializers.CharField(
        allow_null=True, help_text="Why it is down (the kind of failure), null when ok."
    )


class HealthChainSerializer(serializers.Serializer):
    chainId = serializers.IntegerField()
    status = serializers.ChoiceField(
        ["ok", "down", "unknown"],
        help_text="`down` when the chain's most recent job could not reach its node "
        "(ChainUnavailable), `unknown` before any job ran, else `ok`.",
    )
    lastHead = serializers.IntegerField(
        allow_null=True,
        help_text="The highest block any job of the chain's LATs last succeeded at (the state "
        "job reads at the head); null before any success.",
    )
    nodeAnswered = serializers.BooleanField(
        allow_null=True,
        help_text="Whether the node answered the chain's most recent job run; null before any.",
    )
    lastJobAt = serializers.DateTimeField(
        allow_null=True, help_text="When the chain's most recent job run ended."
    )


class HealthLatSerializer(serializers.Serializer):
    address = serializers.CharField(help_text="The LAT's (proxy) address.")
    symbol = serializers.CharField()
    chainId = serializers.IntegerField()
    status = serializers.ChoiceField(
        ["ok", "lagging"],
        help_text="`lagging` when lagSeconds is null or above SYNC_LAG_ALERT_SECONDS "
        "(default 300).",
    )
    lastIndexedBlock = serializers.IntegerField(
        allow_null=True,
        help_text="The last block its deposits job indexed (it stays the chain's confirmation "
        "depth behind the head); null before its first success.",
    )
    lagBlocks = serializers.IntegerField(
        allow_null=True, help_text="The chain's lastHead minus lastIndexedBlock; null if unknown."
    )
    lastSyncedAt = serializers.DateTimeField(
        allow_null=True,
        help_text="The older of the last successes of its `deposits` and `state` jobs; null "
        "while either never succeeded.",
    )
    lagSeconds = serializers.IntegerField(
        allow_null=True, help_text="Whole seconds from lastSyncedAt to now; null if unknown."
    )
    gaps = serializers.ListField(
        child=serializers.CharField(),
        help_text="What the service cannot know of the LAT until staff or its manifest say: a "
        "unit of account without a price feed (its values in ETH unknown), an EigenLayer core "
        "contract that no network preset, manifest or admin override names (the APY from "
        "rewards, operator splits or AVS metadata unknown), a function chain.md names that "
        "the deployment lacks (an older one: `LiquidToken.tokenRegistryOracle()`, "
        "`TokenRegistryOracle.arePricesStale()`, `TokenRegistryOracle.lastPriceUpdate()`; "
        "what it feeds is null). Empty when nothing is missing; "
        "it does not change `status`.",
    )


class HealthWebhooksSerializer(serializers.Serializer):
    status = serializers.ChoiceField(
        ["ok", "lagging"],
        help_text="`lagging` when the oldest webhook event or delivery due has waited more than "
        "WEBHOOK_LAG_ALERT_SECONDS (default 60): the dispatcher is down or behind.",
    )
    pendingDeliveries = serializers.IntegerField(
        help_text="Deliveries pending that can be sent: those of a disabled endpoint, or of a "
        "disabled or expired API key, wait for it and are not counted."
    )
    pendingEvents = serializers.IntegerField(help_text="Outbox events not fanned out yet.")
    oldestPendingSeconds = serializers.IntegerField(
        help_text="Age of the oldest event not fanned out, or delivery due that can be sent "
        "(0 when none)."
    )


class HealthReplicaSerializer(serializers.Serializer):
    name = serializers.CharField(
        help_text="The replica's name: replica1, replica2, ... in DATABASE_REPLICA_URLS' order."
    )
    status = serializers.ChoiceField(
        ["ok", "down"], help_text="`down` when it did not answer, or answered as no replica."
    )
    error = serializers.CharField(
        allow_null=True, help_text="Why it is down (the kind of failure), null when ok."
    )
    lagSeconds = serializers.FloatField(
        allow_null=True,
        help_text="Its replay lag now: 0 when it replayed all the WAL it received, else the age "
        "of the last transaction it replayed; null when down. The read endpoints use a replica "
        "only under REPLICA_MAX_LAG_SECONDS (default 1) and once it replayed the writes their "
        "data's generation names.",
    )


class HealthChecksSerializer(serializers.Serializer):
    database = HealthDependencySerializer()
    redis = HealthDependencySerializer(
        required=False, help_text="Present only when Redis is configured (REDIS_URL)."
    )
    chains = HealthChainSerializer(
        many=True,
        allow_null=True,
        help_text="One per chain with LATs; null when the database is down.",
    )
    lats = HealthLatSerializer(
        many=True, allow_null=True, help_text="One per LAT; null when the database is down."
    )
    webhooks = HealthWebhooksSerializer(
        allow_null=True, help_text="The webhook dispatcher's lag; null when the database is down."
    )
    replicas = HealthReplicaSerializer(
        many=True,
        required=False,
        help_text="Present only when read replicas are configured (DATABASE_REPLICA_URLS): each "
        "one, checked now. One down makes `status` degraded; the reads go to the primary.",
    )


class HealthSerializer(serializers.Serializer):
    status = serializers.ChoiceField(
        ["ok", "degraded", "down"],
        help_text="`down` (503) when the database cannot be reached; `degraded` (200) when Redis, "
        "a read replica or a chain's node is unreachable, a LAT lags or the webhook dispatcher "
        "lags; else `ok`.",
    )
    checks = HealthChecksSerializer()


class VersionSerializer(serializers.Serializer):
    version = serializers.CharField(help_text="The service's version (pyproject.toml).")
    commit = serializers.CharField(
        help_text="The deployed commit: GIT_COMMIT or SOURCE_COMMIT from the environment, else "
        "the checkout's HEAD, else `unknown`."
    )


class OpsView(APIView):
    """Answers for load balancers and ops: no API key is read and no rate limit counts them
    (so they carry no RateLimit-* headers)."""

    authentication_classes: list = []
    permission_classes = [AllowAny]
    throttle_classes: list = []


class HealthView(OpsView):
    @extend_schema(
        operation_id="health",
        tags=["ops"],
        summary="Service health",
        description="The state of each dependency, answered within a second whatever is down. "
        "Never cached.",
        responses={
            200: OpenApiResponse(HealthSerializer, description="`ok` or `degraded`."),
            503: OpenApiResponse(HealthSerializer, description="`down`: no database."),
            **error_responses("internal_server_error", always=()),
        },
    )
    def get(self, request):
        report = health.service_health()
        status_code = 503 if report["status"] == health.DOWN else 200
        response = Response(HealthSerializer(report).data, status=status_code)
        response["Cache-Control"] = "no-store"
        return response


class VersionView(OpsView):
    @extend_schema(
        operation_id="version",
        tags=["ops"],
        summary="Service version",
        responses={200: VersionSerializer, **error_responses("internal_server_error", always=())},
    )
    def get(self, request):
        body = {"version": release.service_version(), "commit": release.service_commit()}
        return Response(VersionSerializer(body).data)


@csrf_exempt
def not_found(request: HttpRequest, unmatched: str = "") -> JsonResponse:
    """Any method on an unknown path is a 404 (not a CSRF failure for a POST)."""
    return handler404(request)


def csrf_failure(request: HttpRequest, reason: str = "") -> HttpResponse:
    """settings.CSRF_FAILURE_VIEW: Django's page for admin forms, the error body elsewhere."""
    if is_admin_path(request.path_info):
        return csrf.csrf_failure(request, reason)
    return json_error("forbidden", f"CSRF verification failed: {reason}", 403)
