"""The service's URLs behind `GET /bench/baseline`: constant JSON through the same middleware, DRF
view and throttle, no database (the stack's own cost)."""

from django.urls import path
from rest_framework.response import Response
from rest_framework.views import APIView

from latsite import urls as service_urls
from latsite.urls import handler400, handler403, handler404, handler500  # noqa: F401


class BaselineView(APIView):
    schema = None

    def get(self, request):
        return Response({"data": [{"name": "baseline", "value": "1000000000000000000"}]})


# The service's routes as its URLconf lists them (flat: no resolver of its own in front).
urlpatterns = [path("bench/baseline", BaselineView.as_view()), *service_urls.urlpatterns]
