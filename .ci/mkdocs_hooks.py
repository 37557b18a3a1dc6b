"""MkDocs hooks: fail the docs build on reST markup that Markdown would print literally.

Docstrings are Markdown (rendered by mkdocstrings); a Sphinx role such as
``:class:`Manager` `` shows up on the page as literal text. Write a Markdown
cross-reference instead: ``[`Manager`][mcruntime.manager.Manager]``.
"""

from __future__ import annotations

import re
from typing import Any

ROLES = "class|meth|func|attr|exc|mod|data|obj|const|ref|doc"
# In source: :class:`X`; on a rendered page: :class:<code>X</code> (the backticks became <code>).
SOURCE_ROLE = re.compile(rf":(?:py:)?(?:{ROLES}):`")
RENDERED_ROLE = re.compile(rf":(?:py:)?(?:{ROLES}):<code>")


def on_page_content(html: str, page: Any, **kwargs: Any) -> str:
    from mkdocs.exceptions import (
        PluginError,
    )  # imported here: the unit test loads this file without mkdocs

    found = RENDERED_ROLE.findall(html)
    if found:
        raise PluginError(
            f"{page.file.src_uri}: {len(found)} literal reST role(s) such as {found[0]!r}..."
            " rendered as text; use Markdown cross-references ([`Name`][mcruntime.pkg.Name])"
        )
    return html
