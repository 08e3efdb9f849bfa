"""The webhook endpoints (extensions.md, "Webhooks"): an API key's endpoints, their secrets,
test pings and deliveries. Every operation needs the key (X-API-Token; without one, 401);
another key's endpoint is a 404."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import permissions
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView
from rest_framework_api_key.models import APIKey

from core.api import cursors
from core.api.params import parse_take, take_parameter
from core.api.schema import error_responses
from core.errors import InvalidInput
from deposits.api.restaking import DepositBodyParser, json_object_body
from webhooks import selectors, services
from webhooks.api import serializers as s

TAG = "Webhooks"
DELIVERY_CURSOR_VERSION = "w1"
KEY_REQUIRED: Any = [{"ApiKey": []}]
_ID_PATH = OpenApiParameter(
    "id",
    {"type": "string", "maxLength": 64},
    OpenApiParameter.PATH,
    description="The endpoint's `id`.",
)
_DELIVERY_PATH = OpenApiParameter(
    "deliveryId",
    {"type": "integer", "minimum": 1, "maximum": 2**63 - 1},
    OpenApiParameter.PATH,
    description="The delivery's `id`.",
)
_WRITE_ERRORS = ("bad_request", "unprocessable_entity")
_NO_CONTENT = OpenApiResponse(description="Deleted.")
_STAFF_ONLY = (
    " Also `forbidden` for an endpoint the service's staff disabled: only they enable it "
    "again, and nothing is sent to it meanwhile."
)


def _staff_only(responses: dict[int, OpenApiResponse], what: str) -> dict[int, OpenApiResponse]:
    """The operation's responses, its 403 also saying what an endpoint staff disabled refuses."""
    forbidden = responses[403]
    described = OpenApiResponse(
        forbidden.response, description=f"{forbidden.description} {what}{_STAFF_ONLY}"
    )
    return {**responses, 403: described}


def _schema(**kwargs: Any):
    """extend_schema of a webhook operation: its tag, and the API key it requires."""
    return extend_schema(tags=[TAG], auth=KEY_REQUIRED, **kwargs)


class HasApiKey(permissions.BasePermission):
    """An API key in X-API-Token (ApiKeyAuthentication); none is a 401."""

    message = "An API key in X-API-Token is required."

    def has_permission(self, request, view) -> bool:
        return isinstance(request.auth, APIKey)


class _KeyedView(APIView):
    permission_classes = [HasApiKey]
    parser_classes = [DepositBodyParser]

    def _endpoint(self, request: Request, public_id: str):
        return services.endpoint_for_key(api_key=api_key(request), public_id=public_id)


def api_key(request: Request) -> APIKey:
    """The caller's key (HasApiKey let the request through)."""
    key = request.auth
    assert isinstance(key, APIKey)
    return key


_STRING_LISTS = ("types", "lats", "wallets")


def _fields(body: dict[str, Any], *, partial: bool) -> services.EndpointFields:
    """The body's members as EndpointFields; a member of the wrong JSON type is a 422."""
    values: dict[str, Any] = {}
    for name in ("url", "description"):
        if name in body:
            if not isinstance(body[name], str):
                raise InvalidInput(f"{name} must be a string.")
            values[name] = body[name]
    for name in _STRING_LISTS:
        if name in body:
            value = body[name]
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise InvalidInput(f"{name} must be an array of strings.")
            if len(value) > 100:
                raise InvalidInput(f"{name} must have at most 100 entries.")
            values[name] = value
    if len(values.get("description", "")) > 500:
        raise InvalidInput("description must be at most 500 characters.")
    if partial and "enabled" in body:
        if not isinstance(body["enabled"], bool):
            raise InvalidInput("enabled must be true or false.")
        values["enabled"] = body["enabled"]
    if not partial and "url" not in values:
        raise InvalidInput("url is required.")
    return services.EndpointFields(**values)


class WebhookListView(_KeyedView):
    @_schema(
        operation_id="webhooks_list",
        summary="The API key's webhook endpoints",
        responses={200: s.WebhookListSerializer, **error_responses()},
    )
    def get(self, request):
        return Response({"data": selectors.endpoint_documents(api_key=api_key(request))})

    @_schema(
        operation_id="webhooks_create",
        summary="Register a webhook endpoint",
        description=(
            "Answers the endpoint with its `secret`, shown this once. At most "
            "`WEBHOOKS_PER_KEY` (default 20) endpoints per API key (422 beyond). Deliveries are "
            "HTTP POSTs of `{id, type, createdAt, data}` signed per Standard Webhooks "
            "(`webhook-id`, `webhook-timestamp`, `webhook-signature`)."
        ),
        request=s.WebhookCreateRequestSerializer,
        responses={201: s.WebhookSecretResponseSerializer, **error_responses(*_WRITE_ERRORS)},
    )
    def post(self, request):
        fields = _fields(json_object_body(request), partial=False)
        endpoint = services.endpoint_create(api_key=api_key(request), fields=fields)
        return Response({"data": selectors.endpoint_document(endpoint, secret=True)}, status=201)


class WebhookDetailView(_KeyedView):
    @_schema(
        operation_id="webhooks_read",
        summary="A webhook endpoint",
        parameters=[_ID_PATH],
        responses={200: s.WebhookResponseSerializer, **error_responses("not_found")},
    )
    def get(self, request, id: str):
        return Response({"data": selectors.endpoint_document(self._endpoint(request, id))})

    @_schema(
        operation_id="webhooks_update",
        summary="Change a webhook endpoint",
        description=(
            "Members left out keep their values; `url` is checked as at creation. Only the "
            "members given are written: a secret rotation, or the service disabling the "
            "endpoint, that happens meanwhile stays. `enabled: false` pauses the endpoint: "
            "events that happen while it is paused are never sent to it, even once it is "
            "enabled again (read them from `GET /lat/{address}/events` or a stream's cursor); "
            "deliveries already pending wait, and go once it is. An endpoint the service's "
            "staff disabled is enabled again by staff only: `enabled: true` is then a 403 "
            "(`forbidden`) and nothing of the request is applied."
        ),
        parameters=[_ID_PATH],
        request=s.WebhookUpdateRequestSerializer,
        responses={
            200: s.WebhookResponseSerializer,
            **_staff_only(error_responses("not_found", *_WRITE_ERRORS), "Here: `enabled: true`."),
        },
    )
    def patch(self, request, id: str):
        endpoint = self._endpoint(request, id)
        # No body at all changes nothing (the schema's request body is optional for a PATCH).
        body = {} if request.stream is None else json_object_body(request)
        fields = _fields(body, partial=True)
        endpoint = services.endpoint_update(endpoint=endpoint, fields=fields)
        return Response({"data": selectors.endpoint_document(endpoint)})

    @_schema(
        operation_id="webhooks_delete",
        summary="Delete a webhook endpoint",
        parameters=[_ID_PATH],
        responses={204: _NO_CONTENT, **error_responses("not_found")},
    )
    def delete(self, request, id: str):
        services.endpoint_delete(endpoint=self._endpoint(request, id))
        return Response(status=204)


class WebhookRotateSecretView(_KeyedView):
    @_schema(
        operation_id="webhooks_rotate_secret",
        summary="A new secret for a webhook endpoint",
        description=(
            "Answers the endpoint with its new `secret`, shown this once. For 24 hours the old "
            "secret signs beside it: `webhook-signature` carries both signatures, "
            "space-separated."
        ),
        parameters=[_ID_PATH],
        request=None,
        responses={
            200: s.WebhookSecretResponseSerializer,
            **error_responses("bad_request", "not_found"),
        },
    )
    def post(self, request, id: str):
        endpoint = services.endpoint_rotate_secret(endpoint=self._endpoint(request, id))
        return Response({"data": selectors.endpoint_document(endpoint, secret=True)})


class WebhookTestView(_KeyedView):
    @_schema(
        operation_id="webhooks_test",
        summary="Send a ping to a webhook endpoint now",
        description=(
            "Delivers a `ping` (`data`: `{endpoint}`) at once and answers with that attempt "
            "(within the 10 s an attempt may take). A ping that fails is retried like any "
            "delivery. An endpoint its key paused is sent the ping; one the service's staff "
            "disabled is not (403)."
        ),
        parameters=[_ID_PATH],
        request=None,
        responses={
            200: s.WebhookTestResponseSerializer,
            **_staff_only(error_responses("bad_request", "not_found"), "Here: the ping."),
        },
    )
    def post(self, request, id: str):
        attempt = services.endpoint_test(endpoint=self._endpoint(request, id))
        document = {
            **selectors.attempt_document(attempt),
            "deliveryId": attempt.delivery_id,
            "eventId": attempt.delivery.event.event_id,
        }
        return Response({"data": document})


class WebhookDeliveryListView(_KeyedView):
    @_schema(
        operation_id="webhooks_deliveries",
        summary="Deliveries to a webhook endpoint, with their attempts",
        description=(
            "Newest first, paged by cursor: `meta.next` is an opaque cursor, or null on the "
            "last page; passed back as `cursor` it returns the deliveries that follow. "
            "Deliveries are kept `DELIVERY_RETENTION_DAYS` (default 14) with their attempts: "
            "a cursor naming one deleted since is a 410 (`gone`), read the listing again from "
            "its first page; a cursor this service did not return is a 422."
        ),
        parameters=[
            _ID_PATH,
            take_parameter("Deliveries"),
            cursors.cursor_parameter(),
        ],
        responses={
            200: s.WebhookDeliveryListSerializer,
            **error_responses("not_found", "unprocessable_entity", "gone"),
        },
    )
    def get(self, request, id: str):
        endpoint = self._endpoint(request, id)
        params = request.query_params
        take = parse_take(params)
        before = None
        if "cursor" in params:
            (before,) = cursors.cursor_decode(params["cursor"], DELIVERY_CURSOR_VERSION, 1)
        rows, last = selectors.delivery_page(endpoint=endpoint, take=take, before=before)
        next_cursor = None if last is None else cursors.cursor_encode(DELIVERY_CURSOR_VERSION, last)
        return Response({"data": rows, "meta": {"next": next_cursor}})


class WebhookDeliveryRetryView(_KeyedView):
    @_schema(
        operation_id="webhooks_delivery_retry",
        summary="Send a delivery again",
        description=(
            "The delivery is sent again at once by the dispatcher, on a retry schedule of its "
            "own; answers the delivery as it is now (`pending`)."
        ),
        parameters=[_ID_PATH, _DELIVERY_PATH],
        request=None,
        responses={
            200: s.WebhookDeliveryResponseSerializer,
            **error_responses("bad_request", "not_found"),
        },
    )
    def post(self, request, id: str, deliveryId: int):
        endpoint = self._endpoint(request, id)
        delivery = selectors.delivery_of(endpoint=endpoint, delivery_id=deliveryId)
        services.delivery_retry(delivery=delivery)
        delivery = selectors.delivery_of(endpoint=endpoint, delivery_id=deliveryId)
        return Response({"data": selectors.delivery_document(delivery)})
