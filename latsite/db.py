"""The generic write helper every app's services use."""

from __future__ import annotations

from typing import Any

from django.db import models


def model_assign(obj: models.Model, values: dict[str, Any]) -> list[str]:
    """Assign the values that differ (a Decimal and an int of the same number are equal);
    returns the names of the fields assigned."""
    changed = []
    for key, value in values.items():
        current = getattr(obj, key)
        if current != value and not (
            current is not None and value is not None and str(current) == str(value)
        ):
            setattr(obj, key, value)
            changed.append(key)
    return changed


def model_update(
    obj: models.Model, values: dict[str, Any], *, also: tuple[str, ...] = ()
) -> list[str]:
    """Assign the values that differ and save only those fields (with `also`, when any
    changed); returns the names of the changed fields."""
    changed = model_assign(obj, values)
    if changed:
        obj.save(update_fields=[*changed, *also])
    return changed
