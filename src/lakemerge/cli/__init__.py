"""The ``lakemerge`` command line: a thin layer over the Python API."""
