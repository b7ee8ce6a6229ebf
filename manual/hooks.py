"""MkDocs hooks: the references made from the code (:mod:`manual.reference`) become pages of the
site when it is built, so that they are never out of date."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
#: Generated pages, by their path in the site's sources.
PAGES = {"reference/pipeline.md": "pipeline_page", "reference/cli.md": "cli_page"}


def on_files(files: Any, config: Any) -> Any:
    from mkdocs.structure.files import File

    for path in (ROOT / "src", ROOT):
        if str(path) not in sys.path:
            sys.path.insert(0, str(path))
    from manual import reference

    for uri, page in PAGES.items():
        files.append(File.generated(config, uri, content=getattr(reference, page)()))
    return files
