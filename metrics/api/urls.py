from django.urls import path

from metrics.api import views

urlpatterns = [
    path("metrics/historical/lat/<str:address>", views.HistoricalView.as_view(), name="historical"),
]

# One LAT's routes: latsite/urls.py includes them after every app's fixed `lat/...` routes.
lat_urlpatterns = [
    path("lat/<str:address>/rates", views.RatesView.as_view(), name="lat-rates"),
]
