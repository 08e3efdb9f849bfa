"""The two kinds of staff, as groups with exactly these permissions.

curators: curated AVS metadata only (the AVS pages; its history is visible to whoever may view
    the AVS).
ops: the refresh schedules (django-celery-beat), API keys, sync status, fees, price feeds, token
    base yields, and "Refresh now" on LATs. "Refresh now" is gated by the permission to change
    a LAT (LatAdmin.has_refresh_permission), which also lets ops set a LAT's group override and
    edit its fees inline on the LAT's page.

Idempotent (a group that exists is given exactly these permissions) and reversible (the groups
are deleted). On a fresh database the permissions of the apps' models do not exist yet when
this runs (Django creates them after the last migration), so they are created first.
"""

from django.contrib.auth.management import create_permissions
from django.db import migrations

BEAT = ("periodictask", "crontabschedule", "intervalschedule", "solarschedule", "clockedschedule")
CRUD = ("view", "add", "change", "delete")

GROUPS = {
    "curators": [("lats", "view_avs"), ("lats", "change_avs")],
    "ops": [
        *(("django_celery_beat", f"{action}_{model}") for model in BEAT for action in CRUD),
        *(("rest_framework_api_key", f"{action}_apikey") for action in CRUD),
        ("lats", "view_syncstatus"),
        ("lats", "view_lat"),
        ("lats", "change_lat"),
        ("lats", "view_feestructure"),
        ("lats", "add_feestructure"),
        ("lats", "change_feestructure"),
        ("lats", "view_pricefeed"),
        ("lats", "add_pricefeed"),
        ("lats", "change_pricefeed"),
        ("lats", "view_token"),
        ("lats", "change_token"),
    ],
}


def create_groups(apps, schema_editor):
    using = schema_editor.connection.alias if schema_editor else "default"
    for label in {label for perms in GROUPS.values() for label, _ in perms}:
        app_config = apps.get_app_config(label)
        models_module = getattr(app_config, "models_module", None)  # a migration state: none
        app_config.models_module = models_module or True  # create_permissions skips None
        try:
            create_permissions(app_config, verbosity=0, using=using, apps=apps)
        finally:
            app_config.models_module = models_module
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    for name, wanted in GROUPS.items():
        perms = []
        for label, codename in wanted:
            perms.append(
                Permission.objects.using(using).get(
                    content_type__app_label=label, codename=codename
                )
            )
        group, _ = Group.objects.using(using).get_or_create(name=name)
        group.permissions.set(perms)


def delete_groups(apps, schema_editor):
    using = schema_editor.connection.alias if schema_editor else "default"
    apps.get_model("auth", "Group").objects.using(using).filter(name__in=GROUPS).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
        ("django_celery_beat", "0019_alter_periodictasks_options"),
        ("rest_framework_api_key", "0005_auto_20220110_1102"),
        ("lats", "0003_history"),
    ]

    operations = [migrations.RunPython(create_groups, delete_groups)]
