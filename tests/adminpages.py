"""Helpers of the admin tests (tests/<app>/test_admin.py): the admin URLs of a model and of an
object, and what a browser would post back from a change page."""

from __future__ import annotations

from django import forms
from django.urls import reverse


def form_data(response) -> dict[str, object]:
    """What the browser would post back from a change page, untouched."""
    data: dict[str, object] = {}

    def add(form) -> None:
        for name, field in form.fields.items():
            bound = form[name]
            value = bound.value()
            if isinstance(field.widget, forms.CheckboxInput):
                if value:
                    data[bound.html_name] = "on"
            elif isinstance(field, forms.MultipleChoiceField):
                data[bound.html_name] = list(value or [])
            elif value is not None:
                data[bound.html_name] = value  # BoundField.value() is already prepared
                if field.show_hidden_initial:  # callable defaults: the page posts it too
                    data[bound.html_initial_name] = value

    add(response.context["adminform"].form)
    for inline in response.context["inline_admin_formsets"]:
        formset = inline.formset
        add(formset.management_form)
        for form in formset.forms:
            add(form)
    return data


def change_url(obj) -> str:
    return reverse(f"admin:{obj._meta.app_label}_{obj._meta.model_name}_change", args=[obj.pk])


def changelist_url(model) -> str:
    return reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist")
