"""Type-check the Python snippets of the docs and the READMEs as a user's code (mypy --strict).

The ```python blocks of one page are one module, in order (later blocks build on
earlier ones). Snippets are fragments (they use a `mgr` or `reconcile` defined
elsewhere), so what a fragment cannot have is not reported: undefined names,
redefinitions, a `return` outside a function. What is reported is what a user's
type checker would say about mcruntime's API: wrong arguments, missing attributes,
wrong types. A block that is not meant for this starts with `# snippet: no-check`.
Run from the repository root:

    python .ci/check_snippets.py
"""

from __future__ import annotations

import re
import sys
import tempfile
from pathlib import Path

from mypy import api

REPO = Path(__file__).resolve().parents[1]
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)
SKIP = "# snippet: no-check"
# pages whose code is a module checked on its own (mypy --strict) and compared with the page
# by a test: the guide shows mcruntime/examples/configsets.py a method at a time
CHECKED_ELSEWHERE = {"docs/guides/writing-a-controller.md"}
# errors that only say a snippet is a fragment of a program
FRAGMENT_CODES = ["name-defined", "used-before-def", "has-type", "no-redef", "return", "misc"]


def modules(out: Path) -> list[Path]:
    written = []
    pages = [
        REPO / "README.md",
        *sorted((REPO / "docs").rglob("*.md")),
        # the provider distributions' and the larger examples' own pages
        *sorted(REPO.glob("providers/*/README.md")),
        *sorted(REPO.glob("examples/*/README.md")),
    ]
    for page in pages:
        if str(page.relative_to(REPO)) in CHECKED_ELSEWHERE:
            continue
        blocks = [b for b in BLOCK.findall(page.read_text()) if not b.lstrip().startswith(SKIP)]
        if not blocks:
            continue
        rel = page.relative_to(REPO).with_suffix("")
        name = "snippet_" + re.sub(r"\W", "_", str(rel))
        path = out / f"{name}.py"
        path.write_text(f"# from {page.relative_to(REPO)}\n" + "\n\n".join(blocks))
        written.append(path)
    return written


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        files = modules(Path(tmp))
        stdout, stderr, status = api.run(
            [
                "--strict",
                "--ignore-missing-imports",
                "--allow-redefinition",
                "--disable-error-code=no-untyped-call",
                *(f"--disable-error-code={code}" for code in FRAGMENT_CODES),
                "--no-incremental",
                # mcruntime itself is checked by mypy; here it is an installed library
                "--follow-imports=silent",
                *map(str, files),
            ]
        )
        sys.stdout.write(stdout.replace(tmp + "/", ""))
        sys.stderr.write(stderr)
        return status


if __name__ == "__main__":
    sys.exit(main())
