from django.conf import settings
from django.contrib import admin
from django.urls import include, path, re_path

from latsite import views

handler400 = "latsite.api.errors.handler400"
handler403 = "latsite.api.errors.handler403"
handler404 = "latsite.api.errors.handler404"
handler500 = "latsite.api.errors.handler500"

urlpatterns = [
    path("", include("lats.api.urls")),
    path("", include("metrics.api.urls")),
    path("api/schema/", views.SchemaView.as_view(), name="schema"),
    path("api/docs/", views.SwaggerView.as_view(url_name="schema"), name="swagger-ui"),
    path("api/redoc/", views.RedocView.as_view(url_name="schema"), name="redoc"),
    path("docs", views.docs_index, name="docs"),
    path("docs/errors", views.error_docs, name="docs-errors"),
    path("health", views.health, name="health"),
    path("admin/", admin.site.urls),
]
if settings.BENCH_BASELINE:
    urlpatterns.append(path("bench/baseline", views.BaselineView.as_view()))
urlpatterns += [
    # Anything else is a JSON 404, whatever DEBUG says.
    re_path(r"^(?P<unmatched>.*)$", views.not_found),
]
