from django.contrib import admin
from django.urls import path, re_path

from activity.api import urls as activity_urls
from catalog.api import urls as catalog_urls
from deposits.api import urls as deposit_urls
from lats.api import urls as lat_urls
from latsite import views
from metrics.api import urls as metrics_urls
from operators.api import urls as operator_urls
from stream.api import urls as stream_urls
from webhooks.api import urls as webhook_urls

handler400 = "core.api.errors.handler400"
handler403 = "core.api.errors.handler403"
handler404 = "core.api.errors.handler404"
handler500 = "core.api.errors.handler500"

# One flat list: Django tries the routes in order, and every `include` on the way to a route
# costs a nested resolver of its own (a LAT's detail sat behind seven: 60 us a request, where
# the flat list takes 10).
urlpatterns = [
    # Every app's fixed `lat/...` routes (`lat/assets`, `lat/operators`, ...) resolve before any
    # `lat/<address>...` route: those segments are not LAT addresses.
    *lat_urls.urlpatterns,
    *operator_urls.urlpatterns,
    *deposit_urls.urlpatterns,
    *activity_urls.urlpatterns,
    *metrics_urls.urlpatterns,
    *catalog_urls.urlpatterns,
    *catalog_urls.lat_urlpatterns,
    *lat_urls.lat_urlpatterns,
    *operator_urls.lat_urlpatterns,
    *deposit_urls.lat_urlpatterns,
    *activity_urls.lat_urlpatterns,
    *metrics_urls.lat_urlpatterns,
    *webhook_urls.urlpatterns,
    *stream_urls.urlpatterns,
    path("api/schema/", views.SchemaView.as_view(), name="schema"),
    path("api/docs/", views.SwaggerView.as_view(url_name="schema"), name="swagger-ui"),
    path("api/redoc/", views.RedocView.as_view(url_name="schema"), name="redoc"),
    path("docs", views.docs_index, name="docs"),
    path("docs/errors", views.error_docs, name="docs-errors"),
    path("health", views.HealthView.as_view(), name="health"),
    path("version", views.VersionView.as_view(), name="version"),
    # Prometheus, for METRICS_ALLOWED_IPS only (/metrics is the API's).
    path("internal/metrics", views.prometheus_metrics, name="prometheus-metrics"),
    path("admin/", admin.site.urls),
    # Anything else is a JSON 404, whatever DEBUG says.
    re_path(r"^(?P<unmatched>.*)$", views.not_found),
]
