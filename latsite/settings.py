"""Settings for the LAT service: one module, driven by the environment.

Every value that differs between a laptop, CI and production comes from an environment
variable (see README.md). The embedded defaults (SQLite file, local-memory cache, eager
Celery off) let `make demo` run with nothing configured.
"""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path

import environ

from core.logs import init_sentry, logging_config
from core.networks import allowed_networks

BASE_DIR = Path(__file__).resolve().parent.parent

env = environ.Env()
if (BASE_DIR / ".env").is_file():
    environ.Env.read_env(BASE_DIR / ".env")

DEBUG = env.bool("DJANGO_DEBUG", default=False)

if DEBUG:
    SECRET_KEY = env.str("DJANGO_SECRET_KEY", default="insecure-development-key-only-for-debug")
else:
    # Required when debug is off: refuse to start with a guessable key.
    SECRET_KEY = env.str("DJANGO_SECRET_KEY")

ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["127.0.0.1", "localhost", "[::1]"])
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "corsheaders",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_celery_beat",
    "rest_framework_api_key",
    "simple_history",  # who changed curated metadata, fees, base yields, price feeds
    "django_prometheus",  # its middlewares' metrics; exposed at /internal/metrics (latsite.views)
    "axes",  # before our apps: lats/admin.py re-registers its admin (actions need permissions)
    "lats",
    "operators",
    "metrics",
    "deposits",
    "catalog",  # the documents that join apps: LAT detail and fees, /yields
    "webhooks",  # endpoints, the outbox, deliveries; the dispatcher (webhooks_dispatch)
    "stream",  # GET /stream/events, served by the stream process (latsite/asgi.py)
    "sync",  # every Celery task, the refresh schedules and the commands that run jobs
    "devchain",  # the local chain's lat_devnet command; no models, imported by no runtime app
]

MIDDLEWARE = [
    "core.middleware.RequestIdMiddleware",  # first: every answer and log line has the id
    "django_prometheus.middleware.PrometheusBeforeMiddleware",  # first: times the whole stack
    "django.middleware.security.SecurityMiddleware",
    "core.middleware.JsonErrorPagesMiddleware",  # errors outside /admin/ in the JSON body
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "corsheaders.middleware.CorsMiddleware",
    "core.middleware.MalformedRequestMiddleware",  # too many parameters, non-UTF-8 bodies
    "core.middleware.RateLimitHeadersMiddleware",  # RateLimit-* on every counted answer
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "simple_history.middleware.HistoryRequestMiddleware",  # the user behind a history row
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "axes.middleware.AxesMiddleware",  # last of the request handling, as django-axes requires
    "django_prometheus.middleware.PrometheusAfterMiddleware",  # last: sees the view's response
]

# Outside /admin/ a CSRF failure answers the JSON error body; in admin, Django's page.
CSRF_FAILURE_VIEW = "latsite.views.csrf_failure"

# Admin login throttling (django-axes): after ADMIN_LOGIN_FAILURE_LIMIT failed logins from one
# client address, logins from it are refused (429) for ADMIN_LOGIN_COOLOFF_MINUTES, without
# checking the password. Attempts are counted in the database, not in Redis, so the login page
# keeps working (and limiting) while Redis is down.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = env.int("ADMIN_LOGIN_FAILURE_LIMIT", default=5)
AXES_COOLOFF_TIME = timedelta(minutes=env.int("ADMIN_LOGIN_COOLOFF_MINUTES", default=5))
AXES_LOCKOUT_PARAMETERS = ["ip_address"]
AXES_RESET_ON_SUCCESS = True
AXES_CLIENT_IP_CALLABLE = "core.admin_site.client_ip"
AXES_LOCKOUT_CALLABLE = "core.admin_site.lockout_response"

ROOT_URLCONF = "latsite.urls"
WSGI_APPLICATION = "latsite.wsgi.application"
ASGI_APPLICATION = "latsite.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# Database: PostgreSQL in tests and production, an SQLite file as the embedded default.
DATABASES = {
    "default": env.db_url("DATABASE_URL", default=f"sqlite:///{BASE_DIR / 'var' / 'db.sqlite3'}"),
}
DATABASES["default"]["CONN_MAX_AGE"] = env.int("DB_CONN_MAX_AGE", default=60)
# Off by default: a health check is one more round trip on every request.
DATABASES["default"]["CONN_HEALTH_CHECKS"] = env.bool("DB_CONN_HEALTH_CHECKS", default=False)
# The LAT list, LAT detail and deposit target statements prepared once per connection
# (core.db.fetch_prepared); off for a pooler that cannot keep prepared statements per client.
# A connection pooler (PgBouncer in transaction mode) at DATABASE_URL: what needs a session of
# its own (the jobs' and the follower's advisory locks, LISTEN in the dispatcher and the stream)
# connects to DATABASE_DIRECT_URL, the database itself; server-side cursors are off, and the hot
# reads' prepared statements off by default (PgBouncer keeps none before 1.21).
DATABASE_DIRECT_URL = env.str("DATABASE_DIRECT_URL", default="")
if DATABASE_DIRECT_URL:
    DATABASES["direct"] = env.db_url_config(DATABASE_DIRECT_URL) | {
        "CONN_MAX_AGE": DATABASES["default"]["CONN_MAX_AGE"],
        "TEST": {"MIRROR": "default"},
    }
    DATABASES["default"]["DISABLE_SERVER_SIDE_CURSORS"] = True
DB_PREPARED_STATEMENTS = env.bool("DB_PREPARED_STATEMENTS", default=not DATABASE_DIRECT_URL)
# Read replicas (core/replicas.py): PostgreSQL streaming replicas of DATABASE_URL's database, as
# database URLs (comma-separated; none by default). The read endpoints read from one that has
# replayed what their data's generation names and lags under REPLICA_MAX_LAG_SECONDS, else from
# the primary; everything else stays on the primary.
# A replica that takes connections and answers none (its server frozen) is given up on after
# REPLICA_CONNECT_TIMEOUT seconds (libpq's connect_timeout, unless its URL sets one; whole
# seconds, at least 2), instead of holding the read that asked it for as long as it stays so.
REPLICA_CONNECT_TIMEOUT = max(2, env.int("REPLICA_CONNECT_TIMEOUT", default=2))
for _i, _url in enumerate(env.list("DATABASE_REPLICA_URLS", default=[]), start=1):
    _replica = env.db_url_config(_url)
    _replica["OPTIONS"] = {"connect_timeout": REPLICA_CONNECT_TIMEOUT} | _replica.get("OPTIONS", {})
    DATABASES[f"replica{_i}"] = _replica | {
        "CONN_MAX_AGE": DATABASES["default"]["CONN_MAX_AGE"],
        "CONN_HEALTH_CHECKS": DATABASES["default"]["CONN_HEALTH_CHECKS"],
        "TEST": {"MIRROR": "default"},
    }
DATABASE_ROUTERS = ["core.replicas.ReplicaRouter"]
REPLICA_MAX_LAG_SECONDS = env.float("REPLICA_MAX_LAG_SECONDS", default=1.0)
# How often a process asks each replica its replay position (seconds); sooner (at most every
# REPLICA_RECHECK_SECONDS) when a read needs a position the replica had not replayed yet; a
# replica that failed is asked again after REPLICA_RETRY_SECONDS.
REPLICA_CHECK_SECONDS = env.float("REPLICA_CHECK_SECONDS", default=0.5)
REPLICA_RECHECK_SECONDS = env.float("REPLICA_RECHECK_SECONDS", default=0.02)
REPLICA_RETRY_SECONDS = env.float("REPLICA_RETRY_SECONDS", default=5.0)
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# Cache and shared counters: Redis when REDIS_URL is set, local memory otherwise.
REDIS_URL = env.str("REDIS_URL", default="")
# A Redis that is down, or accepts connections and never answers, costs a request at most these
# timeouts (seconds): the API then answers from the database (rate limits fail open, the
# read-document cache is bypassed).
REDIS_CONNECT_TIMEOUT = env.float("REDIS_CONNECT_TIMEOUT", default=0.5)
REDIS_SOCKET_TIMEOUT = env.float("REDIS_SOCKET_TIMEOUT", default=0.5)
# After a Redis failure, a process leaves Redis alone for this long (seconds) before trying again.
REDIS_RETRY_AFTER = env.float("REDIS_RETRY_AFTER", default=5.0)
if REDIS_URL:
    CACHES = {
        "default": {
            "BACKEND": "django_redis.cache.RedisCache",
            "LOCATION": REDIS_URL,
            "OPTIONS": {
                "CLIENT_CLASS": "django_redis.client.DefaultClient",
                "SOCKET_CONNECT_TIMEOUT": REDIS_CONNECT_TIMEOUT,
                "SOCKET_TIMEOUT": REDIS_SOCKET_TIMEOUT,
            },
            "KEY_PREFIX": "lat",
        }
    }
else:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}

# The LAT list and detail documents are cached until the data behind them changes, and at most
# this long (what bounds a per-process local-memory cache); 0 turns the cache off.
DOCUMENT_CACHE_SECONDS = env.int("DOCUMENT_CACHE_SECONDS", default=60)
# While Redis cannot be reached, each process keeps its own documents at most this long (seconds).
DOCUMENT_FALLBACK_SECONDS = env.int("DOCUMENT_FALLBACK_SECONDS", default=2)

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
# The service stores no uploaded files; these only keep Django's test live server (which
# serves MEDIA_ROOT at MEDIA_URL ahead of the application) off the API's paths: unset, it
# served the working directory's files at every path, and answered a path too long for a file
# name with a plain-text 500 of its own.
MEDIA_URL = "media/"
MEDIA_ROOT = BASE_DIR / "var" / "media"
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        # Compressed, not hashed: the only static files are the docs pages' bundles, and a
        # manifest would make every page fail until `collectstatic` had run.
        "BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"
    },
}
# Serve the static files straight from the installed apps: nothing to collect before starting.
WHITENOISE_USE_FINDERS = True

# Paths carry no trailing slash (interface.md); never redirect to add one.
APPEND_SLASH = False

# Security: production defaults, relaxed only by explicit environment settings.
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_SSL_REDIRECT = env.bool("SECURE_SSL_REDIRECT", default=not DEBUG)
SECURE_REDIRECT_EXEMPT = [r"^health$", r"^internal/metrics$"]
SESSION_COOKIE_SECURE = env.bool("SESSION_COOKIE_SECURE", default=not DEBUG)
CSRF_COOKIE_SECURE = env.bool("CSRF_COOKIE_SECURE", default=not DEBUG)
SECURE_HSTS_SECONDS = env.int("SECURE_HSTS_SECONDS", default=0 if DEBUG else 31536000)
SECURE_HSTS_INCLUDE_SUBDOMAINS = not DEBUG
SECURE_HSTS_PRELOAD = not DEBUG
SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"

# CORS: the API is public and takes no cookies; admin and docs stay same-origin.
CORS_ALLOW_ALL_ORIGINS = True
CORS_ALLOW_CREDENTIALS = False
CORS_URLS_REGEX = r"^/(lat|metrics|stream)(/.*)?$"
CORS_ALLOW_METHODS = ["GET", "POST", "OPTIONS"]
CORS_ALLOW_HEADERS = [
    "accept",
    "content-type",
    "x-api-token",
    "x-request-id",
    "if-none-match",
    "last-event-id",
]
# Browsers may read the rate-limit headers (core/api/throttling.py), the request id and the
# ETag, and send the ETag back in If-None-Match (core/api/conditional.py).
CORS_EXPOSE_HEADERS = [
    "RateLimit-Limit",
    "RateLimit-Remaining",
    "RateLimit-Reset",
    "Retry-After",
    "X-Request-ID",
    "ETag",
]

# Rate limits (decisions.md): per client IP without a key, per key with one.
RATE_LIMIT_ANON = env.str("RATE_LIMIT_ANON", default="100/min")
RATE_LIMIT_KEYED = env.str("RATE_LIMIT_KEYED", default="1000/min")
# simulate-deposit calls a node per request: a stricter limit of its own, on top of the above.
RATE_LIMIT_SIMULATE = env.str("RATE_LIMIT_SIMULATE", default="20/min")
# Proxies in front of the service that append to X-Forwarded-For (0: use the peer address).
REST_FRAMEWORK_NUM_PROXIES = env.int("NUM_PROXIES", default=0)

# Where error bodies point: {DOCS_URL}/errors#<code>. Defaults to this service's own /docs.
DOCS_URL = env.str("DOCS_URL", default="/docs").rstrip("/")

REST_FRAMEWORK = {
    "DEFAULT_RENDERER_CLASSES": ["core.api.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["rest_framework.parsers.JSONParser"],
    "DEFAULT_AUTHENTICATION_CLASSES": ["core.api.auth.ApiKeyAuthentication"],
    "DEFAULT_THROTTLE_CLASSES": ["core.api.throttling.ClientRateThrottle"],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.AllowAny"],
    "UNAUTHENTICATED_USER": None,
    "EXCEPTION_HANDLER": "core.api.errors.exception_handler",
    "DEFAULT_SCHEMA_CLASS": "core.api.schema.RateLimitedAutoSchema",
    "DEFAULT_PAGINATION_CLASS": None,
    "COERCE_DECIMAL_TO_STRING": True,
    "UNICODE_JSON": True,
    "COMPACT_JSON": True,
    "NUM_PROXIES": REST_FRAMEWORK_NUM_PROXIES,
}

SPECTACULAR_SETTINGS = {
    "TITLE": "LAT Data and Direct Restaking API",
    "DESCRIPTION": (
        "Information about Liquid AVS Tokens (LATs) and unsigned deposit transactions for them. "
        "Large integer amounts are decimal strings in the token's smallest unit. Addresses are "
        "accepted in any letter case and returned EIP-55 checksummed. Every error answers "
        '`{"error": {"code", "message", "doc_url"}}`; see /docs/errors for the codes.'
    ),
    "VERSION": "1.0.0",
    "LICENSE": {"name": "MIT"},
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    # `ok`/`lagging` of a LAT and of the webhook dispatcher in /health: one enum, named as before.
    "ENUM_NAME_OVERRIDES": {
        "HealthLatStatusEnum": ["ok", "lagging"],
        "HealthDependencyStatusEnum": ["ok", "down"],
    },
    "SECURITY": [],
    "AUTHENTICATION_WHITELIST": [],
    "APPEND_COMPONENTS": {
        "securitySchemes": {
            "ApiKey": {
                "type": "apiKey",
                "in": "header",
                "name": "X-API-Token",
                "description": "Optional. Raises the caller's rate limit. Unknown keys answer "
                "401, disabled or expired ones 403.",
            }
        }
    },
}

# Prometheus (README, "Monitoring"): GET /internal/metrics answers only clients at these
# addresses or networks (comma-separated IPs/CIDRs), as the peer address (REMOTE_ADDR) shows them,
# or as X-Forwarded-For does behind NUM_PROXIES trusted proxies; everyone else gets a 403.
METRICS_ALLOWED_IPS = env.list("METRICS_ALLOWED_IPS", default=["127.0.0.1", "::1"])
allowed_networks(METRICS_ALLOWED_IPS)  # refused at start, not at the first scrape
# Largest body POST /lat/{address}/deposit and /simulate-deposit accept, bytes (else a 400).
DEPOSIT_BODY_MAX_BYTES = env.int("DEPOSIT_BODY_MAX_BYTES", default=16384)
# Most entries (assets/amounts) one deposit request may carry (else a 422).
DEPOSIT_MAX_ASSETS = env.int("DEPOSIT_MAX_ASSETS", default=32)
# simulate-deposit: a total deadline per simulation (seconds; past it a 500 saying the node did
# not answer in time), and at most this many simulations waiting on a node per process, so that
# a dead node never ties up the workers that serve the read endpoints.
SIMULATE_TIMEOUT = env.float("SIMULATE_TIMEOUT", default=5.0)
SIMULATE_MAX_IN_FLIGHT = env.int("SIMULATE_MAX_IN_FLIGHT", default=4)

# Chain access: RPC_URL is the default node; RPC_URL_<chainId> overrides it per chain.
RPC_URL = env.str("RPC_URL", default="")
RPC_URLS = {
    int(m.group(1)): value
    for key, value in env.ENVIRON.items()
    if (m := re.fullmatch(r"RPC_URL_(\d+)", key)) and value
}
RPC_TIMEOUT = env.float("RPC_TIMEOUT", default=10.0)
# Most requests in one JSON-RPC batch (block headers, plain eth_calls); larger sets are chunked.
RPC_BATCH_SIZE = env.int("RPC_BATCH_SIZE", default=100)
# Multicall3: used where it has code (checked once per node and remembered); elsewhere reads
# take a route that needs no deployed helper. MULTICALL3_ADDRESS_<chainId> overrides the address
# per chain; an empty value turns Multicall3 off (for every chain, or for that chain).
MULTICALL3_ADDRESS = env.str(
    "MULTICALL3_ADDRESS", default="0xcA11bde05977b3631167028862bE2a173976CA11"
)
MULTICALL3_ADDRESSES = {
    int(m.group(1)): value.strip()
    for key, value in env.ENVIRON.items()
    if (m := re.fullmatch(r"MULTICALL3_ADDRESS_(\d+)", key))
}
# A reorg deeper than this many blocks stops indexing the LAT (an error recorded for ops)
# instead of deleting history; REORG_MAX_DEPTH_<chainId> overrides per chain.
REORG_MAX_DEPTH = env.int("REORG_MAX_DEPTH", default=64)
REORG_MAX_DEPTH_BY_CHAIN = {
    int(m.group(1)): int(value)
    for key, value in env.ENVIRON.items()
    if (m := re.fullmatch(r"REORG_MAX_DEPTH_(\d+)", key))
}
# Blocks behind the head that the deposit indexer stays (reorg safety). Local dev chains
# (chain id 31337) default to 0; CHAIN_CONFIRMATIONS_<chainId> overrides per chain.
CHAIN_CONFIRMATIONS = env.int("CHAIN_CONFIRMATIONS", default=12)
CHAIN_CONFIRMATIONS_BY_CHAIN = {31337: 0} | {
    int(m.group(1)): int(value)
    for key, value in env.ENVIRON.items()
    if (m := re.fullmatch(r"CHAIN_CONFIRMATIONS_(\d+)", key))
}
# The head follower (lat_follow): how often it asks each node for its head, and the longest
# wait between retries while a node is unreachable.
HEAD_POLL_INTERVAL = env.float("HEAD_POLL_INTERVAL", default=0.5)
# A follower (or beat) that stops without dying loses its role within this many seconds: the
# server ends its database session once idle that long (core/leadership.py).
FOLLOWER_LEASE_SECONDS = env.float("FOLLOWER_LEASE_SECONDS", default=10.0)
# WS_URL_<chainId>: a WebSocket node whose new-head notices wake the follower at once (it still
# reads the head over HTTP, and polls every HEAD_POLL_INTERVAL when the socket is down or unset).
WS_URLS = {
    int(m.group(1)): value
    for key, value in env.ENVIRON.items()
    if (m := re.fullmatch(r"WS_URL_(\d+)", key)) and value
}
HEAD_POLL_MAX_BACKOFF = env.float("HEAD_POLL_MAX_BACKOFF", default=30.0)
# Largest block range asked of eth_getLogs; halved while a node refuses a range.
LOG_BLOCK_RANGE = env.int("LOG_BLOCK_RANGE", default=5000)
# AVS metadata documents: fetched with a timeout and a size cap.
METADATA_FETCH_TIMEOUT = env.float("METADATA_FETCH_TIMEOUT", default=5.0)
METADATA_MAX_BYTES = env.int("METADATA_MAX_BYTES", default=65536)
# Off in production: a metadata URI on a private, loopback or link-local host is refused.
METADATA_ALLOW_PRIVATE_HOSTS = env.bool("METADATA_ALLOW_PRIVATE_HOSTS", default=False)
# The only ports a metadata URL may name (tests widen it to their local server's port).
METADATA_ALLOWED_PORTS = env.list("METADATA_ALLOWED_PORTS", cast=int, default=[80, 443])

# Webhooks (extensions.md, "Webhooks"; README, "Webhooks"). Off in production: plain http, and a
# URL whose host resolves to a private, loopback or link-local address, are refused.
WEBHOOK_ALLOW_HTTP = env.bool("WEBHOOK_ALLOW_HTTP", default=False)
WEBHOOK_ALLOW_PRIVATE_HOSTS = env.bool("WEBHOOK_ALLOW_PRIVATE_HOSTS", default=False)
# Ports a webhook URL may name besides 443 and 80.
WEBHOOK_ALLOWED_PORTS = env.list("WEBHOOK_ALLOWED_PORTS", cast=int, default=[])
WEBHOOKS_PER_KEY = env.int("WEBHOOKS_PER_KEY", default=20)
# One attempt: connect to the last byte within this many seconds; at most this much answer read.
WEBHOOK_TIMEOUT = env.float("WEBHOOK_TIMEOUT", default=10.0)
WEBHOOK_MAX_BYTES = env.int("WEBHOOK_MAX_BYTES", default=65536)
# Seconds after the first attempt at which a retryable failure is tried again.
WEBHOOK_RETRY_SCHEDULE = env.list(
    "WEBHOOK_RETRY_SCHEDULE",
    cast=float,
    default=[5, 30, 120, 600, 1800, 3600, 10800, 21600, 43200, 86400],
)
# An endpoint whose attempts have all failed for this many seconds is disabled (3 days).
WEBHOOK_DISABLE_AFTER = env.float("WEBHOOK_DISABLE_AFTER", default=3 * 86400)
# The dispatcher: sending threads, sends at once per endpoint, polling without NOTIFY.
WEBHOOK_WORKERS = env.int("WEBHOOK_WORKERS", default=64)
WEBHOOK_PER_ENDPOINT = env.int("WEBHOOK_PER_ENDPOINT", default=4)  # across dispatchers
# Senders that failing endpoints (their last attempt failed) may hold together; 0: a quarter of
# WEBHOOK_WORKERS (at least one).
WEBHOOK_FAILING_WORKERS = env.int("WEBHOOK_FAILING_WORKERS", default=0)
WEBHOOK_POLL_SECONDS = env.float("WEBHOOK_POLL_SECONDS", default=0.5)
# A delivery claimed for an attempt is sent again after this many seconds when its attempt was not
# recorded (its dispatcher died mid-attempt); at least twice WEBHOOK_TIMEOUT.
WEBHOOK_LEASE_SECONDS = env.float("WEBHOOK_LEASE_SECONDS", default=120)
# /health is degraded when the oldest webhook event or delivery due waits longer than this.
WEBHOOK_LAG_ALERT_SECONDS = env.float("WEBHOOK_LAG_ALERT_SECONDS", default=60)
# Retention (webhooks/retention.py, run by beat): the feed's events (the outbox, the stream's
# cursors) are kept this many days, deliveries with their attempts and history this many days;
# the jobs delete the older ones, this many rows per transaction.
PUSH_RETENTION_DAYS = env.float("PUSH_RETENTION_DAYS", default=30)
DELIVERY_RETENTION_DAYS = env.float("DELIVERY_RETENTION_DAYS", default=14)
RETENTION_BATCH = env.int("RETENTION_BATCH", default=5000)

# The live stream (GET /stream/events, the Procfile's stream process; stream/).
# Open streams per client address (429 beyond), shared by every stream process through Redis.
STREAM_MAX_PER_IP = env.int("STREAM_MAX_PER_IP", default=10)
# Every stream is written to at least this often: a comment line where no message came (one
# timer for the process, stream/hub.py).
STREAM_KEEPALIVE_SECONDS = env.float("STREAM_KEEPALIVE_SECONDS", default=15)
# A stream's slot lapses after this unless renewed (the slots of a process that died); the
# process renews its slots a third of it apart.
STREAM_SLOT_SECONDS = env.int("STREAM_SLOT_SECONDS", default=60)
# A granted connect's stream starts at once; a grant not taken within this many seconds (its
# client went away while the connect was being granted) lapses and its slot is released. Keep
# it below STREAM_SLOT_SECONDS.
STREAM_GRANT_SECONDS = env.float("STREAM_GRANT_SECONDS", default=10)
# Messages queued for one stream at most: past them it catches up from the stored feed.
STREAM_BUFFER = env.int("STREAM_BUFFER", default=1000)
# A client that leaves one message unread this long (seconds) is disconnected.
STREAM_SEND_TIMEOUT = env.float("STREAM_SEND_TIMEOUT", default=10)
# The feed is read on the outbox's NOTIFY (PostgreSQL) and, while LISTEN is down or where there
# is none (SQLite), at least this often (with LISTEN up, every 30 s: stream/hub.py).
STREAM_POLL_SECONDS = env.float("STREAM_POLL_SECONDS", default=1.0)
# Rows read per query when a resumed stream catches up from the stored feed.
STREAM_BACKLOG_PAGE = env.int("STREAM_BACKLOG_PAGE", default=500)
# The API keys of a process's open streams are checked this often (seconds, one query for all):
# a stream whose key was disabled, expired or deleted meanwhile ends.
STREAM_KEY_CHECK_SECONDS = env.float("STREAM_KEY_CHECK_SECONDS", default=30)

# Yields (GET /yields, in the shape of DefiLlama's yield server's pools): ETH's USD price per
# chain from a Chainlink-style ETH/USD feed, ETH_USD_FEED_<chainId> (a feed address on that
# chain; wins over the one known for Ethereum mainnet, lats/networks.py); the project's name
# and each pool's link ({address} and {chainId} are filled in; empty: the LAT's detail here);
# YIELDS_CHAIN_NAME_<chainId> names a chain as DefiLlama does.
ETH_USD_FEEDS = {
    int(m.group(1)): value
    for key, value in env.ENVIRON.items()
    if (m := re.fullmatch(r"ETH_USD_FEED_(\d+)", key)) and value
}
YIELDS_PROJECT = env.str("YIELDS_PROJECT", default="liquid-avs-token")
YIELDS_URL_TEMPLATE = env.str("YIELDS_URL_TEMPLATE", default="")
YIELDS_CHAIN_NAMES = {
    int(m.group(1)): value
    for key, value in env.ENVIRON.items()
    if (m := re.fullmatch(r"YIELDS_CHAIN_NAME_(\d+)", key)) and value
}

# Celery: Redis as broker when REDIS_URL is set.
CELERY_BROKER_URL = env.str("CELERY_BROKER_URL", default=REDIS_URL or "memory://")
CELERY_RESULT_BACKEND = None
CELERY_RESULT_EXPIRES = None  # no results are stored: no backend_cleanup task for beat
CELERY_TASK_IGNORE_RESULT = True
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_TIMEZONE = "UTC"
CELERY_TASK_SOFT_TIME_LIMIT = env.int("CELERY_TASK_SOFT_TIME_LIMIT", default=300)
CELERY_TASK_TIME_LIMIT = env.int("CELERY_TASK_TIME_LIMIT", default=360)
CELERY_TASK_ACKS_LATE = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# Workers and beat reconnect by themselves when Redis goes away: retry for ever, and never wait
# on a broker socket longer than the timeouts below.
CELERY_BROKER_CONNECTION_RETRY = True
CELERY_BROKER_CONNECTION_MAX_RETRIES = None
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "socket_connect_timeout": 5,
    "socket_timeout": 10,
    "retry_on_timeout": True,
    "health_check_interval": 10,
    "socket_keepalive": True,
}
CELERY_BEAT_SCHEDULER = "sync.beat:SingleBeatScheduler"

# The worker logs through LOGGING below (request ids, JSON lines, redaction), not Celery's own.
CELERY_WORKER_HIJACK_ROOT_LOGGER = False

# Logs (core/logs.py): `plain` lines or `json` lines, each with the request id; node URLs
# redacted. Any other LOG_FORMAT refuses to start.
LOG_FORMAT = env.str("LOG_FORMAT", default="plain").strip().lower()
LOGGING = logging_config(LOG_FORMAT, env.str("LOG_LEVEL", default="INFO"))

# Sentry, only when SENTRY_DSN is set: the Django and Celery integrations, no personal data,
# every event redacted as the logs are.
SENTRY_DSN = env.str("SENTRY_DSN", default="")
SENTRY_ENVIRONMENT = env.str("SENTRY_ENVIRONMENT", default="development" if DEBUG else "production")
SENTRY_RELEASE = env.str(
    "SENTRY_RELEASE", default=env.str("GIT_COMMIT", default=env.str("SOURCE_COMMIT", default=""))
)
if SENTRY_DSN:
    init_sentry(dsn=SENTRY_DSN, environment=SENTRY_ENVIRONMENT, release=SENTRY_RELEASE or None)

# GET /health: a LAT whose deposits or state job last succeeded longer ago than this (seconds)
# lags, and the service is `degraded` (sync/health.py).
SYNC_LAG_ALERT_SECONDS = env.int("SYNC_LAG_ALERT_SECONDS", default=300)

# Model history (django-simple-history): read-only in admin. Reverting from a history row would
# bypass the services (staff-edit marks of curated AVS fields, checksummed addresses).
SIMPLE_HISTORY_REVERT_DISABLED = True
