"""``python -m mcruntime``: the library's command-line tools.

python -m mcruntime crd myoperator.api:FleetJob > crd.yaml
python -m mcruntime crd myoperator.api -o json | kubectl apply -f -
python -m mcruntime --version
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from typing import Any

from mcruntime import __version__

__all__ = ["main"]

_CRD_HELP = """\
Print the CustomResourceDefinitions of pydantic Resource classes (apiextensions.k8s.io/v1).

Each TARGET is module:Class, or a module (every Resource class it defines with
api_version and kind). Classes of the same group and kind become the versions
of one CRD. Settings come from each class's crd_options (mcruntime.crd.CRDOptions).
"""


#: the words YAML 1.1 reads as booleans (go-yaml v2's, kubectl's)
_YAML11_BOOLEAN = re.compile(
    r"y|Y|yes|Yes|YES|n|N|no|No|NO|true|True|TRUE|false|False|FALSE|on|On|ON|off|Off|OFF"
)


def _crd(args: argparse.Namespace) -> int:
    from mcruntime.crd import CRDError, generate_crds, load_resource_classes

    try:
        crds = generate_crds(*load_resource_classes(args.targets))
    except CRDError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    out: Any = crds[0] if len(crds) == 1 else {"apiVersion": "v1", "kind": "List", "items": crds}
    if args.output == "json":
        print(json.dumps(out, indent=2))
    else:
        import yaml

        class _Dumper(yaml.SafeDumper):  # type: ignore[misc]  # PyYAML ships no annotations
            def ignore_aliases(self, data: Any) -> bool:
                return True

        def string(dumper: yaml.SafeDumper, text: str) -> yaml.ScalarNode:
            # kubectl reads YAML 1.1 (go-yaml v2), where y, n (any case) are booleans too:
            # PyYAML quotes only the words it reads as booleans itself
            style = "'" if _YAML11_BOOLEAN.fullmatch(text) else None
            return dumper.represent_scalar("tag:yaml.org,2002:str", text, style=style)

        _Dumper.add_representer(str, string)
        sys.stdout.write(yaml.dump_all(crds, Dumper=_Dumper, sort_keys=False))
    return 0


def main(argv: list[str] | None = None) -> int:
    """Run a ``python -m mcruntime`` command; returns the exit code."""
    parser = argparse.ArgumentParser(
        prog="python -m mcruntime", description="mcruntime command-line tools"
    )
    parser.add_argument("--version", action="version", version=f"mcruntime {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    crd = commands.add_parser(
        "crd",
        help="print the CRDs of pydantic Resource classes",
        description=_CRD_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    crd.add_argument("targets", nargs="+", metavar="TARGET", help="module:Class or module")
    crd.add_argument(
        "-o",
        "--output",
        choices=["yaml", "json"],
        default="yaml",
        help="yaml (default; several CRDs as documents separated by ---) or json (several CRDs "
        "as a v1 List)",
    )
    crd.set_defaults(run=_crd)
    args = parser.parse_args(argv)
    code: int = args.run(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
