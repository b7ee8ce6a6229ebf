"""Session settings set for a block come back afterwards (commit records, VACUUM's listing)."""

from __future__ import annotations

from typing import Any

import pytest

from lakemerge.spark.scoped import scoped_conf


def test_scoped_settings_are_put_back_set_or_unset_even_when_the_block_fails(spark: Any) -> None:
    key, unset = "spark.lakemerge.test.scoped", "spark.lakemerge.test.unset"
    spark.conf.set(key, "before")
    try:
        with pytest.raises(RuntimeError), scoped_conf(spark, {key: "inside", unset: "inside"}):
            assert spark.conf.get(key) == spark.conf.get(unset) == "inside"
            raise RuntimeError("boom")
        assert spark.conf.get(key) == "before"
        assert spark.conf.get(unset, None) is None
    finally:
        spark.conf.unset(key)
