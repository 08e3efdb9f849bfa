"""Pages that are not API resources: the error docs, health, and the catch-all 404."""

from __future__ import annotations

from django.db import connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.views.decorators.cache import cache_control
from django.views.decorators.http import require_GET
from rest_framework.response import Response
from rest_framework.views import APIView

from latsite.api.errors import ERROR_CODES, handler404


@require_GET
@cache_control(max_age=3600, public=True)
def error_docs(request: HttpRequest) -> HttpResponse:
    codes = [
        {"code": code, "status": status, "title": title, "when": when}
        for code, (status, title, when) in ERROR_CODES.items()
    ]
    return render(request, "docs/errors.html", {"codes": codes})


@require_GET
def docs_index(request: HttpRequest) -> HttpResponse:
    return render(request, "docs/index.html")


def health(request: HttpRequest) -> JsonResponse:
    """Liveness and database reachability, for load balancers."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except Exception:
        return JsonResponse({"status": "unavailable"}, status=503)
    return JsonResponse({"status": "ok"})


_CONSTANT = {"data": [{"name": "baseline", "value": "1000000000000000000"}]}


class BaselineView(APIView):
    """Constant JSON through the same stack as the API (benchmarks' baseline); not in the schema."""

    schema = None

    def get(self, request):
        return Response(_CONSTANT)


def not_found(request: HttpRequest, unmatched: str = "") -> JsonResponse:
    return handler404(request)
