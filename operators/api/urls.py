from django.urls import path

from operators.api import views

# Fixed segments: `/lat/operators` is not a LAT address.
urlpatterns = [
    path("lat/operators", views.OperatorListView.as_view(), name="operator-list"),
    path("lat/operators/<str:address>", views.OperatorDetailView.as_view(), name="operator-detail"),
]

# One LAT's routes: latsite/urls.py includes them after every app's fixed `lat/...` routes.
lat_urlpatterns = [
    path("lat/<str:address>/operators", views.LatOperatorsView.as_view(), name="lat-operators"),
    path(
        "lat/<str:address>/staker-nodes",
        views.StakerNodesView.as_view(),
        name="lat-staker-nodes",
    ),
]
