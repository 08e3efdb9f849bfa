from django.db import migrations, models

FIELD = models.CharField(
    blank=True,
    choices=[("key", "its API key"), ("service", "the service"), ("staff", "staff")],
    default="",
    help_text="Who disabled the endpoint; empty while it is enabled.",
    max_length=8,
)


def fill(apps, schema_editor):
    """Who disabled each disabled endpoint, from the reason the service wrote then (staff's and
    the service's begin with their own words; any other disabled endpoint its key paused)."""
    Endpoint = apps.get_model("webhooks", "Endpoint")
    disabled = Endpoint.objects.filter(enabled=False)
    disabled.filter(disabled_reason__startswith="Disabled by ").update(disabled_by="staff")
    failing = disabled.filter(disabled_reason__startswith="Every delivery failed for ")
    failing.update(disabled_by="service")
    disabled.filter(disabled_by="").update(disabled_by="key")


class Migration(migrations.Migration):
    dependencies = [
        ("webhooks", "0003_delivery_lease"),
    ]

    operations = [
        migrations.AddField(model_name="endpoint", name="disabled_by", field=FIELD),
        migrations.AddField(model_name="historicalendpoint", name="disabled_by", field=FIELD),
        migrations.RunPython(fill, migrations.RunPython.noop),
    ]
