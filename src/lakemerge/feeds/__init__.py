"""Feeds: find change files and read them into rows with their provenance."""

from __future__ import annotations

from lakemerge.feeds.files import FeedFile, list_feed_files
from lakemerge.feeds.readers import RawFeed, read_feed

__all__ = ["FeedFile", "RawFeed", "list_feed_files", "read_feed"]
