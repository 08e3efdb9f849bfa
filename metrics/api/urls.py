from django.urls import path

from deposits.api.views import DepositListView
from metrics.api import views

urlpatterns = [
    path("metrics/historical/lat/<str:address>", views.HistoricalView.as_view(), name="historical"),
    path("metrics/deposits", DepositListView.as_view(), name="deposit-list"),
]
