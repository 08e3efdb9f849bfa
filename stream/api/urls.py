from django.urls import path

from stream.api.views import StreamEventsView

urlpatterns = [
    path("stream/events", StreamEventsView.as_view(), name="stream-events"),
]
