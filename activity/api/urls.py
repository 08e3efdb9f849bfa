from django.urls import path

from activity.api import views

urlpatterns = [
    path("wallets/<str:address>", views.WalletView.as_view(), name="wallet"),
]

# One LAT's routes: latsite/urls.py includes them after every app's fixed `lat/...` routes.
lat_urlpatterns = [
    path("lat/<str:address>/holders", views.HolderListView.as_view(), name="lat-holders"),
    path("lat/<str:address>/events", views.EventListView.as_view(), name="lat-events"),
    path("lat/<str:address>/status", views.LatStatusView.as_view(), name="lat-status"),
]
