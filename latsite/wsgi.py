"""The WSGI application, as gunicorn (the Procfile's `web`) loads it in each worker.

Once it is loaded, every view the URLconf names is imported and what is then alive is frozen out
of the garbage collector's reach (`gc.freeze()`, as the gc module's documentation advises for a
server's processes): the ~170,000 objects of Django, DRF, web3 and the service live as long as
the process, and a full collection, which walked them all (120 ms, about once a thousand LAT
detail requests: ~120 us a request), now walks only what requests left behind (3 ms). With
gunicorn's `--preload` this runs in the master, before the fork, where it also keeps the
collector from writing to the pages the workers share.
"""

import gc
import os

from django.core.wsgi import get_wsgi_application
from django.urls import get_resolver

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "latsite.settings")

application = get_wsgi_application()
get_resolver().url_patterns  # noqa: B018 (the URLconf and every view it imports)
gc.collect()  # what loading left as garbage is freed, not frozen
gc.freeze()
