from django.urls import path

from lats.api import transactions, views
from operators.api import views as operator_views

# Fixed segments first: `/lat/assets` and `/lat/operators` are not LAT addresses.
urlpatterns = [
    path("lat", views.LatListView.as_view(), name="lat-list"),
    path("lat/assets", views.SupportedTokensView.as_view(), name="lat-assets"),
    path("lat/operators", operator_views.OperatorListView.as_view(), name="operator-list"),
    path(
        "lat/operators/<str:address>",
        operator_views.OperatorDetailView.as_view(),
        name="operator-detail",
    ),
    path("lat/exchange/<str:address>", views.ExchangeRatesView.as_view(), name="lat-exchange"),
    path("lat/avs/<str:address>", views.AvsLatsView.as_view(), name="lat-avs"),
    path("lat/<str:address>", views.LatDetailView.as_view(), name="lat-detail"),
    path("lat/<str:address>/tokens", views.LatTokensView.as_view(), name="lat-tokens"),
    path(
        "lat/<str:address>/operators",
        operator_views.LatOperatorsView.as_view(),
        name="lat-operators",
    ),
    path(
        "lat/<str:address>/staker-nodes",
        operator_views.StakerNodesView.as_view(),
        name="lat-staker-nodes",
    ),
    path("lat/<str:address>/fees", views.LatFeesView.as_view(), name="lat-fees"),
    path(
        "lat/<str:address>/deposit",
        transactions.DepositBuildView.as_view(),
        name="lat-deposit",
    ),
    path(
        "lat/<str:address>/simulate-deposit",
        transactions.DepositSimulateView.as_view(),
        name="lat-simulate-deposit",
    ),
]
