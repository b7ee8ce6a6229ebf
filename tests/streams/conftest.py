"""The Kafka broker the streaming tests share (started once, on 127.0.0.1)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from bench.kafka import broker


@pytest.fixture(scope="session")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with broker(tmp_path_factory.mktemp("kafka")) as bootstrap:
        yield bootstrap
