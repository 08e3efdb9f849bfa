from decimal import Decimal

from django.db import migrations

import lats.models


def fill(apps, schema_editor):
    """Each link's staked_amount from its LAT's nodes' assets (summed here in integers: uint256
    values overflow SQLite's SUM)."""
    LatToken = apps.get_model("lats", "LatToken")
    NodeAsset = apps.get_model("operators", "NodeAsset")
    totals: dict[tuple[int, int], int] = {}  # ints: a Decimal sum rounds to 28 digits
    rows = NodeAsset.objects.values_list("node__lat_id", "token_id", "staked_amount")
    for lat_id, token_id, amount in rows.iterator():
        totals[lat_id, token_id] = totals.get((lat_id, token_id), 0) + int(amount)
    for link in LatToken.objects.all().iterator():
        total = totals.get((link.lat_id, link.token_id), 0)
        if total:
            LatToken.objects.filter(pk=link.pk).update(staked_amount=Decimal(total))


class Migration(migrations.Migration):
    dependencies = [
        ("lats", "0009_lat_apy_gaps"),
        ("operators", "0001_initial"),
    ]

    operations = [
        migrations.AddField(
            model_name="lattoken",
            name="staked_amount",
            field=lats.models.UintField(
                editable=False,
                help_text=(
                    "What the LAT's staker nodes stake of the token: the sum of their assets' "
                    "staked_amount, kept in step by operators.services.store_lat_staked on every "
                    "write of a node or its assets (the LAT detail reads it with the LAT, without "
                    "summing)."
                ),
            ),
        ),
        migrations.RunPython(fill, migrations.RunPython.noop),
    ]
