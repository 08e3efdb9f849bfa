"""python manage.py lat_schedules : create the missing default refresh schedules, then list them."""

from __future__ import annotations

from django.core.management.base import BaseCommand
from django_celery_beat.models import PeriodicTask

from sync.schedules import DEFAULT_SCHEDULES, ensure_default_schedules


class Command(BaseCommand):
    help = (
        "Create the default periodic tasks of the refresh jobs that do not exist yet; never "
        "changes one that exists (ops edit them in admin). Then show each as it now stands."
    )

    def handle(self, *args, **options):
        created = ensure_default_schedules()
        if created:
            for name in created:
                self.stdout.write(f"created {name}")
        else:
            self.stdout.write("every default schedule exists; nothing created")
        tasks = {
            task.name: task
            for task in PeriodicTask.objects.select_related(
                "interval", "crontab", "solar", "clocked"
            ).filter(name__in=[d.name for d in DEFAULT_SCHEDULES])
        }
        for default in DEFAULT_SCHEDULES:
            task = tasks.get(default.name)
            if task is None:
                continue
            state = "enabled" if task.enabled else "DISABLED"
            self.stdout.write(f"  {task.name}: {task.task}, {task.scheduler}, {state}")
