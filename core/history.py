"""Model history (django-simple-history), shared by the apps whose rows people configure."""

from __future__ import annotations

from simple_history.models import HistoricalRecords


class History(HistoricalRecords):
    """HistoricalRecords that records no row for a save of excluded fields only.

    django-simple-history records every save; a refresh job that saves only what it reads from
    the chain (a price feed's answer, every minute) would flood the history with rows that show
    no change of what people configure. A save naming its `update_fields`, all of them excluded
    from the history, is therefore not recorded; any other save is.
    """

    def post_save(self, instance, created, using=None, **kwargs):
        update_fields = kwargs.get("update_fields")
        if not created and update_fields and set(update_fields) <= set(self.excluded_fields):
            return
        super().post_save(instance, created, using=using, **kwargs)
