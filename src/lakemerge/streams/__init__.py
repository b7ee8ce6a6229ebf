"""Streams of changes: Structured Streaming queries whose micro-batches are lakemerge's batches."""
