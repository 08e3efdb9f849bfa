"""The stream process's Prometheus metrics (scraped from its /internal/metrics, like any
process's: README, "Monitoring")."""

from __future__ import annotations

from prometheus_client import Counter, Gauge

OPEN = Gauge(
    "lat_stream_open",
    "Streams open (GET /stream/events) on this process.",
    multiprocess_mode="livesum",
)
MESSAGES = Counter("lat_stream_messages_sent", "Stream messages sent, every client counted.")
DROPPED = Counter(
    "lat_stream_clients_dropped",
    "Streams ended because their client left a message unread for STREAM_SEND_TIMEOUT.",
)
CATCH_UPS = Counter(
    "lat_stream_catch_ups",
    "Times a stream read the stored feed again because a burst outran its queue.",
)
