from django.urls import path

from deposits.api import restaking, views

urlpatterns = [
    path("metrics/deposits", views.DepositListView.as_view(), name="deposit-list"),
]

# One LAT's routes: latsite/urls.py includes them after every app's fixed `lat/...` routes.
lat_urlpatterns = [
    path("lat/<str:address>/deposit", restaking.DepositBuildView.as_view(), name="lat-deposit"),
    path(
        "lat/<str:address>/simulate-deposit",
        restaking.DepositSimulateView.as_view(),
        name="lat-simulate-deposit",
    ),
]
