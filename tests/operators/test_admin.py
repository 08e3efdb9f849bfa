"""The admins of operators (operators/admin.py): operator metadata is editable, the address
is not."""

from __future__ import annotations

import pytest

from tests import factories as f
from tests.adminpages import change_url, form_data

pytestmark = pytest.mark.django_db

A = f.address


def test_operator_metadata_editable(admin_client, world):
    operator = world.op2
    url = change_url(operator)
    data = form_data(admin_client.get(url))
    data.update({"metadata_name": "Operator Two", "address": A(0x1)})
    assert admin_client.post(url, data).status_code == 302
    operator.refresh_from_db()
    assert operator.metadata_name == "Operator Two"
    assert operator.address == A(0x902)
