from django.urls import path

from lats.api import views

# Fixed segments: `/lat/assets`, `/lat/exchange/...` and `/lat/avs/...` are not LAT addresses.
urlpatterns = [
    path("lat", views.LatListView.as_view(), name="lat-list"),
    path("lat/assets", views.SupportedTokensView.as_view(), name="lat-assets"),
    path("lat/exchange/<str:address>", views.ExchangeRatesView.as_view(), name="lat-exchange"),
    path("lat/avs/<str:address>", views.AvsLatsView.as_view(), name="lat-avs"),
]

# One LAT's routes: latsite/urls.py includes them after every app's fixed `lat/...` routes.
lat_urlpatterns = [
    path("lat/<str:address>/tokens", views.LatTokensView.as_view(), name="lat-tokens"),
]
