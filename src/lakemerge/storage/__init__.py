"""Where landing zones and tables are stored: one filesystem interface
(:mod:`lakemerge.storage.filesystem`), reached through Hadoop in a classic session and through
``pyarrow.fs`` or Spark's own listing over Spark Connect (:mod:`lakemerge.storage.filesystems`)."""
