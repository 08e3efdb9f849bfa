from django.urls import path

from metrics.api import views

urlpatterns = [
    path("metrics/historical/lat/<str:address>", views.HistoricalView.as_view(), name="historical"),
]
