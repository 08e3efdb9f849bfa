from django.urls import path

from catalog.api import views

urlpatterns = [
    path("yields", views.YieldsView.as_view(), name="yields"),
]

# One LAT's routes: latsite/urls.py includes them after every app's fixed `lat/...` routes.
lat_urlpatterns = [
    path("lat/<str:address>", views.LatDetailView.as_view(), name="lat-detail"),
    path("lat/<str:address>/fees", views.LatFeesView.as_view(), name="lat-fees"),
]
