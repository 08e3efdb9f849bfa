"""The service's URLs behind `GET /bench/baseline`: constant JSON through the same middleware, DRF
view and throttle, no database (the stack's own cost)."""

from django.urls import include, path
from rest_framework.response import Response
from rest_framework.views import APIView

from latsite.urls import handler400, handler403, handler404, handler500  # noqa: F401


class BaselineView(APIView):
    schema = None

    def get(self, request):
        return Response({"data": [{"name": "baseline", "value": "1000000000000000000"}]})


urlpatterns = [path("bench/baseline", BaselineView.as_view()), path("", include("latsite.urls"))]
