"""Admin pieces every app shares: the login throttle's hooks (django-axes) and the third-party
admins re-registered so that each of their actions declares the permission it needs."""

from __future__ import annotations

import math

from axes.admin import AccessAttemptAdmin
from axes.helpers import get_cool_off
from axes.models import AccessAttempt
from django.conf import settings
from django.contrib import admin
from django.http import HttpRequest
from django.template.response import TemplateResponse
from django_celery_beat.admin import PeriodicTaskAdmin
from django_celery_beat.models import PeriodicTask
from rest_framework.request import Request
from rest_framework.throttling import BaseThrottle

# --- login throttle (settings.AXES_*) ---------------------------------------------------------


def client_ip(request: HttpRequest) -> str | None:
    """The client address the login throttle counts by: the one the API's rate limits see
    (REMOTE_ADDR, or X-Forwarded-For as NUM_PROXIES trusted proxies set it)."""
    return BaseThrottle().get_ident(Request(request))


def lockout_response(request: HttpRequest, original_response=None, credentials=None):
    """429 with Retry-After and an admin-styled page; the password was not checked."""
    cool_off = get_cool_off(request)
    seconds = math.ceil(cool_off.total_seconds()) if cool_off else None
    context = {
        **admin.site.each_context(request),
        "title": "Too many failed logins",
        "failure_limit": settings.AXES_FAILURE_LIMIT,
        "minutes": math.ceil(seconds / 60) if seconds else None,
    }
    response = TemplateResponse(request, "admin/lockout.html", context, status=429)
    if seconds:
        response["Retry-After"] = str(seconds)
    return response.render()


# --- third-party admins: every action declares its permission ----------------------------------


class ScheduleAdmin(PeriodicTaskAdmin):
    """django-celery-beat's admin of the refresh schedules; its actions declare no permission,
    so staff who may only view schedules could enable, disable or run them."""

    @admin.action(description="Enable selected tasks", permissions=["change"])
    def enable_tasks(self, request, queryset):
        return super().enable_tasks(request, queryset)

    @admin.action(description="Disable selected tasks", permissions=["change"])
    def disable_tasks(self, request, queryset):
        return super().disable_tasks(request, queryset)

    @admin.action(description="Toggle activity of selected tasks", permissions=["change"])
    def toggle_tasks(self, request, queryset):
        return super().toggle_tasks(request, queryset)

    @admin.action(description="Run selected tasks", permissions=["run"])
    def run_tasks(self, request, queryset):
        return super().run_tasks(request, queryset)

    def has_run_permission(self, request) -> bool:
        """Running a schedule now is a change to what the jobs do: schedule editors only."""
        return self.has_change_permission(request)


class LoginAttemptAdmin(AccessAttemptAdmin):
    """django-axes' failed-login records; its clean-up action deletes rows."""

    @admin.action(description="Clean up expired attempts", permissions=["delete"])
    def cleanup_expired_attempts(self, request, queryset):
        return super().cleanup_expired_attempts(request, queryset)


def guard_third_party_actions(site: admin.AdminSite) -> None:
    """Replace the third-party admins whose actions declare no permission (called once, from
    lats/admin.py, after their apps registered them)."""
    for model, model_admin in ((PeriodicTask, ScheduleAdmin), (AccessAttempt, LoginAttemptAdmin)):
        if site.is_registered(model):
            site.unregister(model)
        site.register(model, model_admin)
