from django.urls import path

from deposits.api import activity, restaking, views

urlpatterns = [
    path("metrics/deposits", views.DepositListView.as_view(), name="deposit-list"),
    path("wallets/<str:address>", activity.WalletView.as_view(), name="wallet"),
]

# One LAT's routes: latsite/urls.py includes them after every app's fixed `lat/...` routes.
lat_urlpatterns = [
    path("lat/<str:address>/deposit", restaking.DepositBuildView.as_view(), name="lat-deposit"),
    path(
        "lat/<str:address>/simulate-deposit",
        restaking.DepositSimulateView.as_view(),
        name="lat-simulate-deposit",
    ),
    path("lat/<str:address>/holders", activity.HolderListView.as_view(), name="lat-holders"),
    path("lat/<str:address>/events", activity.EventListView.as_view(), name="lat-events"),
    path("lat/<str:address>/status", activity.LatStatusView.as_view(), name="lat-status"),
]
