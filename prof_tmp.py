import os, time, cProfile, pstats
os.environ.update(DJANGO_DEBUG="false", DJANGO_SECRET_KEY="x", SECURE_SSL_REDIRECT="false", DATABASE_URL="postgres://postgres@127.0.0.1:5432/lat_bench", REDIS_URL="redis://127.0.0.1:6379/15", RATE_LIMIT_ANON="1000000000/s", ALLOWED_HOSTS="*")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "latsite.settings")
import django; django.setup()
from django.test import Client
from lats.models import Lat
c = Client()
lat = Lat.objects.order_by("id").first().proxy_address
for path in ["/bench/baseline", "/lat", f"/lat/{lat}?withTvl=true&withCuratedMetadata=true&withRewards=true"]:
    for _ in range(50): c.get(path)
    t=time.perf_counter(); n=300
    for _ in range(n): r=c.get(path)
    print(path[:40], r.status_code, (time.perf_counter()-t)/n*1000, "ms")
pr=cProfile.Profile(); pr.enable()
for _ in range(200): c.get(f"/lat/{lat}?withTvl=true&withCuratedMetadata=true&withRewards=true")
pr.disable(); pstats.Stats(pr).sort_stats("cumulative").print_stats(35)
