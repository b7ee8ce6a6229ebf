"""What builds the manual (docs/, ``mkdocs build``) beside its pages: the references made from the
code, and the MkDocs hooks that add them to the site."""
