"""A store's schemas as a Da Vinci client knows them: its key schema, and its value schemas by id, fetched again from
the metadata store when a record written with a schema registered after the client started arrives."""

from __future__ import annotations

from collections.abc import Callable

from venice_core.errors import VeniceError
from venice_core.protocol import serde
from venice_core.protocol.serde import AvroSchemaJson


class StoreSchemas:
    def __init__(
        self,
        store: str,
        key: AvroSchemaJson,
        values: dict[int, AvroSchemaJson],
        fetch_values: Callable[[], dict[int, AvroSchemaJson]],
    ) -> None:
        self.store = store
        self.key = key
        self.parsed_key = serde.parse(key)  # parsed once, not on every read
        self.values = values
        self._fetch_values = fetch_values

    def value(self, schema_id: int) -> AvroSchemaJson:
        """The value schema `schema_id`, known or registered since."""
        return self.values.get(schema_id) or self.registered(schema_id)

    def registered(self, schema_id: int) -> AvroSchemaJson:
        """A value schema registered after the client started (a record written with it arrived)."""
        # A new dict, not an update: readers on other threads see the old one or the new one, whole.
        self.values = self._fetch_values()
        if schema_id not in self.values:
            raise VeniceError(f"value schema {schema_id} of store '{self.store}' is not registered")
        return self.values[schema_id]

    @property
    def newest_value(self) -> AvroSchemaJson:
        return self.values[max(self.values)]
