"""The frames a batch caches while it is planned, released when it is done or when planning fails."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from lakemerge.spark.cache import persisted

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


class Cached:
    """Frames persisted (memory, then disk) for a batch: each is read more than once."""

    def __init__(self) -> None:
        self.frames: list[DataFrame] = []

    def persist(self, frame: DataFrame, *, compressed: bool = True) -> DataFrame:
        """``frame``, persisted and kept for :meth:`release`: the frame to build on, whose plan is
        the cached data (:func:`lakemerge.spark.cache.persisted`, ``compressed`` too)."""
        kept, leaf = persisted(frame, compressed=compressed)
        self.frames.append(kept)
        return leaf

    def release(self) -> None:
        """Unpersist every frame."""
        for frame in self.frames:
            frame.unpersist()
        self.frames.clear()

    @contextmanager
    def released_on_error(self) -> Iterator[Cached]:
        """Release every frame if the block raises (a plan that fails leaves nothing cached)."""
        try:
            yield self
        except BaseException:
            self.release()
            raise
