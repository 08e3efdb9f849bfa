"""Pages that are not API resources: the error docs, the OpenAPI pages, health, the catch-all
404 and the CSRF failure page. Outside /admin/ each answers its errors in the JSON error body."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps

from django.db import connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.views import csrf
from django.views.decorators.cache import cache_control
from django.views.decorators.csrf import csrf_exempt
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerView
from rest_framework.renderers import JSONRenderer

from latsite.api.errors import ERROR_CODES, handler404, json_error, method_not_allowed
from latsite.middleware import is_admin_path

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


@read_only
def health(request: HttpRequest) -> JsonResponse:
    """Liveness and database reachability, for load balancers."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except Exception:
        return JsonResponse({"status": "unavailable"}, status=503)
    return JsonResponse({"status": "ok"})


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


@csrf_exempt
def not_found(request: HttpRequest, unmatched: str = "") -> JsonResponse:
    """Any method on an unknown path is a 404 (not a CSRF failure for a POST)."""
    return handler404(request)


def csrf_failure(request: HttpRequest, reason: str = "") -> HttpResponse:
    """settings.CSRF_FAILURE_VIEW: Django's page for admin forms, the error body elsewhere."""
    if is_admin_path(request.path_info):
        return csrf.csrf_failure(request, reason)
    return json_error("forbidden", f"CSRF verification failed: {reason}", 403)
