"""The lower bounds the distributions declare, as exact pins for a pip constraints file.

Each ``name>=X`` requirement of the given projects (their dependencies and the extras named,
``.[test]``) whose environment marker holds on this Python (or the one ``--python X.Y`` names)
becomes ``name==X`` (the highest floor where two projects name one distribution). Installed with ``pip install -c``, the tests
then run on the oldest versions the projects say they work with; a floor that cannot be
installed (no such version, or one another floor's distribution refuses) fails the install,
as it would for a user who pins the floors. Run from the repository root:

    python .ci/floors.py [--python 3.13] ".[test]" ./providers/kind > constraints.txt
"""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version


def _requirements(project: str) -> tuple[str, list[Requirement]]:
    """The name of ``project`` (``path[extra,...]``) and the requirements it installs."""
    found = re.fullmatch(r"(.+?)(?:\[([^\]]*)\])?", project)
    assert found is not None
    path, extras = found.group(1), [e.strip() for e in (found.group(2) or "").split(",") if e]
    config = tomllib.loads((Path(path) / "pyproject.toml").read_text())["project"]
    name = canonicalize_name(config["name"])
    optional = config.get("optional-dependencies", {})
    todo, seen, out = list(extras), set(), [Requirement(r) for r in config.get("dependencies", [])]
    while todo:  # an extra naming the project's own extras (``mcruntime[cel,socks]``)
        extra = todo.pop()
        if extra in seen:
            continue
        seen.add(extra)
        for line in optional[extra]:
            req = Requirement(line)
            if canonicalize_name(req.name) == name:
                todo.extend(req.extras)
            else:
                out.append(req)
    return name, out


def floors(projects: list[str], python: str | None = None) -> dict[str, Version]:
    """The floor of each distribution the projects require on this Python (or ``python``,
    ``X.Y``), by name."""
    environment = {"extra": ""}
    if python is not None:
        environment |= {"python_version": python, "python_full_version": f"{python}.0"}
    named = [_requirements(p) for p in projects]
    ours = {name for name, _ in named}
    pins: dict[str, Version] = {}
    for _, requirements in named:
        for req in requirements:
            name = canonicalize_name(req.name)
            if name in ours or (req.marker is not None and not req.marker.evaluate(environment)):
                continue
            for spec in req.specifier:
                if spec.operator == ">=":
                    floor = Version(spec.version)
                    pins[name] = max(pins.get(name, floor), floor)
    return pins


def main(argv: list[str]) -> int:
    python = None
    if argv[:1] == ["--python"] and len(argv) > 1:
        python, argv = argv[1], argv[2:]
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    for name, version in sorted(floors(argv, python).items()):
        print(f"{name}=={version}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
