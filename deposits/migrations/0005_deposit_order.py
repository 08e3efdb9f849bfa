"""The deposit listing's order without `seq`: the counts per filter and per span of blocks
(DepositCount, DepositSpan) filled from the stored deposits, `seq` dropped, and the filter
indexes ending with the whole listing key for keyset paging. Reversible: going back ranks the
deposits densely again."""

import django.db.models.deletion
from django.db import migrations, models

SPAN_BLOCKS = 4096  # DepositSpan.SPAN_BLOCKS when this migration was written

FILL_COUNTS = """
INSERT INTO deposits_depositcount (lat_id, field, address, n)
SELECT lat_id, '', '', COUNT(*) FROM deposits_deposit GROUP BY lat_id
UNION ALL
SELECT lat_id, 'sender', sender, COUNT(*) FROM deposits_deposit GROUP BY lat_id, sender
UNION ALL
SELECT lat_id, 'receiver', receiver, COUNT(*) FROM deposits_deposit GROUP BY lat_id, receiver
UNION ALL
SELECT lat_id, 'asset', asset, COUNT(*) FROM deposits_deposit GROUP BY lat_id, asset
"""
FILL_SPANS = f"""
INSERT INTO deposits_depositspan (lat_id, span, n)
SELECT lat_id, block_number / {SPAN_BLOCKS}, COUNT(*) FROM deposits_deposit
GROUP BY lat_id, block_number / {SPAN_BLOCKS}
"""
# Back: the dense rank of (block_number, log_index, chain_id), oldest first.
RANK_SEQ = """
UPDATE deposits_deposit SET seq = (
    SELECT r.rank FROM (
        SELECT id, ROW_NUMBER() OVER (ORDER BY block_number, log_index, chain_id) AS rank
        FROM deposits_deposit
    ) AS r WHERE r.id = deposits_deposit.id
)
"""


def _count_key(field: str) -> models.Index:
    return models.Index(
        fields=(field, "block_number", "log_index", "chain_id"), name=f"deposit_{field}_key_idx"
    )


class Migration(migrations.Migration):
    dependencies = [
        ("deposits", "0004_holder_buckets"),
        ("lats", "0005_chain_head_oracle"),
    ]

    operations = [
        migrations.CreateModel(
            name="DepositCount",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("field", models.CharField(blank=True, choices=[("", "every deposit"), ("sender", "Sender"), ("receiver", "Receiver"), ("asset", "Asset")], max_length=8)),
                ("address", models.CharField(blank=True, help_text="Checksummed, or empty.", max_length=42)),
                ("n", models.PositiveBigIntegerField(default=0)),
                ("lat", models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name="deposit_counts", to="lats.lat")),
            ],
            options={
                "constraints": [models.UniqueConstraint(fields=("field", "address", "lat"), name="deposit_count_uniq")],
            },
        ),
        migrations.CreateModel(
            name="DepositSpan",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("span", models.PositiveBigIntegerField()),
                ("n", models.PositiveBigIntegerField(default=0)),
                ("lat", models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name="deposit_spans", to="lats.lat")),
            ],
            options={
                "constraints": [models.UniqueConstraint(fields=("span", "lat"), name="deposit_span_uniq")],
            },
        ),
        migrations.RunSQL([FILL_COUNTS, FILL_SPANS], migrations.RunSQL.noop),
        migrations.AlterModelOptions(
            name="deposit",
            options={"ordering": ("-block_number", "-log_index", "-chain_id")},
        ),
        migrations.AlterField(
            model_name="deposit",
            name="seq",
            field=models.PositiveBigIntegerField(null=True, unique=True),
        ),
        migrations.RunSQL(migrations.RunSQL.noop, RANK_SEQ),
        migrations.RemoveField(model_name="deposit", name="seq"),
        *(
            migrations.RemoveIndex(model_name="deposit", name=name)
            for name in (
                "deposit_lat_idx",
                "deposit_sender_idx",
                "deposit_receiver_idx",
                "deposit_asset_idx",
                "deposit_lat_block_idx",
                "deposit_tx_idx",  # the unique (chain_id, tx_hash, log_index) serves lookups
            )
        ),
        migrations.RemoveIndex(model_name="event", name="event_lat_idx"),  # the unique key does
        # The foreign keys' own indexes: the (lat, ...) indexes lead with the column.
        migrations.AlterField(
            model_name="deposit",
            name="lat",
            field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name="deposits", to="lats.lat"),
        ),
        migrations.AlterField(
            model_name="holder",
            name="lat",
            field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name="holders", to="lats.lat"),
        ),
        migrations.AlterField(
            model_name="event",
            name="lat",
            field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name="events", to="lats.lat"),
        ),
        *(
            migrations.AddIndex(model_name="deposit", index=_count_key(field))
            for field in ("lat", "sender", "receiver", "asset")
        ),
    ]
