from django.apps import AppConfig


class OperatorsConfig(AppConfig):
    name = "operators"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.db.models.signals import post_delete, post_save

        from operators.services import staked_changed

        # LatToken.staked_amount follows every write of what the LAT's nodes stake: ORM
        # writes of the follower, admin and tests alike.
        for sender, signal in (
            ("operators.NodeAsset", post_save),
            ("operators.NodeAsset", post_delete),
            ("operators.StakerNode", post_delete),
        ):
            signal.connect(staked_changed, sender=sender, dispatch_uid=f"staked.{sender}.{signal}")

        def link_created(sender, instance, created, **kwargs):
            if created:
                staked_changed(sender, instance)

        post_save.connect(
            link_created, sender="lats.LatToken", dispatch_uid="staked.LatToken", weak=False
        )
