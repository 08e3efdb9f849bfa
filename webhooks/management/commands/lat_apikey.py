"""`python manage.py lat_apikey create --name NAME`: an API key for scripts and ops, printed
once (only its hash is stored), beside the admin's page of keys."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError
from rest_framework_api_key.models import APIKey


class Command(BaseCommand):
    help = "Create an API key (X-API-Token) and print it once."

    def add_arguments(self, parser) -> None:
        actions = parser.add_subparsers(dest="action", required=True)
        create = actions.add_parser("create", help="Create a key and print it.")
        create.add_argument("--name", required=True, help="What the key is for (shown in admin).")

    def handle(self, *args: Any, **options: Any) -> None:
        name = options["name"].strip()
        if not name or len(name) > 50:
            raise CommandError("--name must be 1 to 50 characters.")
        _, key = APIKey.objects.create_key(name=name)
        self.stdout.write(key)
