from django.contrib import admin
from django.urls import include, path, re_path

from activity.api import urls as activity_urls
from catalog.api import urls as catalog_urls
from deposits.api import urls as deposit_urls
from lats.api import urls as lat_urls
from latsite import views
from metrics.api import urls as metrics_urls
from operators.api import urls as operator_urls

handler400 = "core.api.errors.handler400"
handler403 = "core.api.errors.handler403"
handler404 = "core.api.errors.handler404"
handler500 = "core.api.errors.handler500"

urlpatterns = [
    # Every app's fixed `lat/...` routes (`lat/assets`, `lat/operators`, ...) resolve before any
    # `lat/<address>...` route: those segments are not LAT addresses.
    path("", include("lats.api.urls")),
    path("", include("operators.api.urls")),
    path("", include("deposits.api.urls")),
    path("", include("activity.api.urls")),
    path("", include("metrics.api.urls")),
    path("", include("catalog.api.urls")),
    path("", include(catalog_urls.lat_urlpatterns)),
    path("", include(lat_urls.lat_urlpatterns)),
    path("", include(operator_urls.lat_urlpatterns)),
    path("", include(deposit_urls.lat_urlpatterns)),
    path("", include(activity_urls.lat_urlpatterns)),
    path("", include(metrics_urls.lat_urlpatterns)),
    path("", include("webhooks.api.urls")),
    path("", include("stream.api.urls")),
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
