"""ZSTD_WITH_DICT values the routing client decompresses itself, as Venice's clients do: every read says it can
(`READ_HEADERS`), a region server answers a ZSTD_WITH_DICT version's values still compressed, naming the version they
were read from, and the client fetches that version's dictionary once (`GET /dictionary/<store>/<version>`, from any
instance of the region) and keeps its decompressor. A reader that does not say so (curl, a browser) gets the values
decompressed by the server."""

from __future__ import annotations

import threading
from collections.abc import Callable

from venice_core.client.wire import Answer
from venice_core.errors import ComponentError
from venice_core.protocol import compression
from venice_core.protocol.compression import CompressionStrategy, decompressor

READ_HEADERS = f"{compression.SUPPORTED_HEADER}: {int(CompressionStrategy.ZSTD_WITH_DICT)}\r\n"
VERSION_HEADER = "X-Venice-Version"
_WITH_DICT = str(int(CompressionStrategy.ZSTD_WITH_DICT))
VERSIONS_KEPT = 3  # a store's newest versions whose decompressors are kept (the current one, and a swap's either side)


class Dictionaries:
    """The decompressors of the ZSTD_WITH_DICT versions a client has read, by store and version. `fetch(path)` asks
    any instance of the region (the client's `_request("GET", path)`)."""

    def __init__(self, fetch: Callable[[str], Answer]) -> None:
        self._fetch = fetch
        self._decompressors: dict[tuple[str, int], Callable[[bytes], bytes]] = {}
        self._lock = threading.Lock()  # one fetch at a time: a version's dictionary is fetched once

    def for_answer(self, store: str, headers: dict[str, str]) -> Callable[[bytes], bytes] | None:
        """What the values of an answer need to be decompressed with: None when they came decompressed, else the
        decompressor of the version the answer names (its dictionary fetched at the first answer of it)."""
        strategy = headers.get(compression.HEADER)
        if strategy is None:
            return None
        if strategy != _WITH_DICT:
            raise ComponentError(f"a region server answered values of '{store}' compressed with strategy {strategy}")
        try:
            number = int(headers[VERSION_HEADER])
        except (KeyError, ValueError):
            raise ComponentError(
                f"a region server answered compressed values of '{store}' without their version"
            ) from None
        found = self._decompressors.get((store, number))
        return found if found is not None else self._load(store, number)

    def _load(self, store: str, number: int) -> Callable[[bytes], bytes]:
        with self._lock:
            found = self._decompressors.get((store, number))
            if found is not None:
                return found
            status, headers, body = self._fetch(f"/dictionary/{store}/{number}")
            if status != 200 or not body:
                said = headers.get("X-Venice-Error") or body[:200].decode(errors="replace")
                raise ComponentError(f"cannot fetch the dictionary of '{store}' version {number}: {status} {said}")
            made = decompressor(CompressionStrategy.ZSTD_WITH_DICT, body)
            kept = sorted(n for s, n in self._decompressors if s == store)
            for old in kept[: max(0, len(kept) + 1 - VERSIONS_KEPT)]:
                del self._decompressors[(store, old)]
            self._decompressors[(store, number)] = made
            return made

    def cached(self, store: str) -> list[int]:
        """The versions of `store` whose dictionary this client holds."""
        return sorted(n for s, n in self._decompressors if s == store)
