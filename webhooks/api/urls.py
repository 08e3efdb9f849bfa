from django.urls import path

from webhooks.api import views

urlpatterns = [
    path("webhooks", views.WebhookListView.as_view(), name="webhooks"),
    path("webhooks/<str:id>", views.WebhookDetailView.as_view(), name="webhook"),
    path(
        "webhooks/<str:id>/rotate-secret",
        views.WebhookRotateSecretView.as_view(),
        name="webhook-rotate-secret",
    ),
    path("webhooks/<str:id>/test", views.WebhookTestView.as_view(), name="webhook-test"),
    path(
        "webhooks/<str:id>/deliveries",
        views.WebhookDeliveryListView.as_view(),
        name="webhook-deliveries",
    ),
    path(
        "webhooks/<str:id>/deliveries/<int:deliveryId>/retry",
        views.WebhookDeliveryRetryView.as_view(),
        name="webhook-delivery-retry",
    ),
]
