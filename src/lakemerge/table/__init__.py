"""Table: Delta I/O around a batch: existence, schema checks, commit metadata, the ledger of
applied files, and inspection (history, show, diff)."""
