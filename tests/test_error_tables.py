"""Every domain error class of every service has its own row in that service's status table.

A row is required for each class itself, not inherited through the MRO: the lookup does
walk the MRO (so a subclass declared elsewhere still gets its parent's status), but a
class added to a service's error module must say its status explicitly.
"""

from __future__ import annotations

import inspect
from collections.abc import Collection
from types import ModuleType

import pytest

from agenthub.bucketsync import errors as bucketsync_errors
from agenthub.bucketsync.api.errors import STATUS as BUCKETSYNC_STATUS
from agenthub.errors import AgentHubError
from agenthub.httperrors import status_for
from agenthub.hubcore import errors as hubcore_errors
from agenthub.hubcore.api.errors import STATUS as HUBCORE_STATUS
from agenthub.statehub import errors as statehub_errors
from agenthub.statehub.api.errors import STATUS as STATEHUB_STATUS

# Only which classes have a row matters here; a Collection (covariant, unlike a Mapping's
# keys) lets each service's table stand as a table of the common base.
Rows = Collection[type[AgentHubError]]
SERVICES: dict[str, tuple[ModuleType, type[AgentHubError], Rows]] = {
    "statehub": (statehub_errors, statehub_errors.StateHubError, STATEHUB_STATUS),
    "hubcore": (hubcore_errors, hubcore_errors.HubCoreError, HUBCORE_STATUS),
    "bucketsync": (bucketsync_errors, bucketsync_errors.BucketSyncError, BUCKETSYNC_STATUS),
}


def error_classes(module: ModuleType, base: type[AgentHubError]) -> list[type[AgentHubError]]:
    return [
        cls
        for _name, cls in inspect.getmembers(module, inspect.isclass)
        if issubclass(cls, base) and cls.__module__ == module.__name__
    ]


def missing_rows(module: ModuleType, base: type[AgentHubError], table: Rows) -> list[str]:
    return [cls.__name__ for cls in error_classes(module, base) if cls not in table]


@pytest.mark.parametrize("service", sorted(SERVICES))
def test_every_error_class_has_a_row_in_its_services_status_table(service: str) -> None:
    module, base, table = SERVICES[service]

    assert missing_rows(module, base, table) == []


@pytest.mark.parametrize("service", sorted(SERVICES))
def test_status_tables_hold_only_their_services_errors(service: str) -> None:
    module, base, table = SERVICES[service]

    assert set(table) == set(error_classes(module, base))


def test_a_class_without_a_row_is_reported_missing() -> None:
    module, base, table = SERVICES["bucketsync"]
    without = {cls for cls in table if cls.__name__ != "PartialWrite"}

    assert missing_rows(module, base, without) == ["PartialWrite"]


@pytest.mark.parametrize("service", sorted(SERVICES))
def test_no_error_class_carries_an_http_status(service: str) -> None:
    module, base, _table = SERVICES[service]

    assert [cls.__name__ for cls in error_classes(module, base) if hasattr(cls, "status")] == []


def test_a_subclass_without_a_row_takes_its_nearest_ancestors_status() -> None:
    class ReadOnlyReplica(bucketsync_errors.StorageUnavailable):
        pass

    table = {
        bucketsync_errors.BucketSyncError: 500,
        bucketsync_errors.StorageUnavailable: 503,
    }

    assert status_for(table, ReadOnlyReplica("down")) == 503


def test_an_error_outside_the_table_is_a_lookup_error() -> None:
    # Widened to the common base so the type checker lets a foreign error reach the lookup.
    statehub_table: dict[type[AgentHubError], int] = dict(STATEHUB_STATUS.items())

    with pytest.raises(LookupError, match="NotFound"):
        status_for(statehub_table, bucketsync_errors.NotFound("x"))
