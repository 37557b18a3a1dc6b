"""Each provider page's options table names exactly the options its model accepts.

A user copies option names from docs/providers/<name>.md (or a distribution's
providers/<name>/README.md) into `--provider-option` or
`load_provider`: an option the page names that the model lacks is refused, and one the
model has that the page leaves out is one nobody finds.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from mcruntime.plugins import available_providers

REPO = Path(__file__).resolve().parents[2]
PAGES = {
    **{p.stem: p for p in sorted((REPO / "docs" / "providers").glob("*.md")) if p.stem != "index"},
    **{f"{p.parent.name} README": p for p in sorted(REPO.glob("providers/*/README.md"))},
}


def documented(page: Path) -> set[str]:
    """The options in the page's table (the one whose header starts `| option |`)."""
    text = page.read_text(encoding="utf-8")
    table = re.search(r"^\| option \|.*?\n((?:\|.*\n)+)", text, flags=re.MULTILINE)
    if table is None:
        return set()
    first_cells = re.findall(r"^\|([^|]*)\|", table.group(1), flags=re.MULTILINE)
    return {name for cell in first_cells for name in re.findall(r"`([a-z_]+)`", cell)}


@pytest.mark.parametrize("label", sorted(PAGES))
def test_the_options_table_names_the_options_the_provider_accepts(label: str) -> None:
    page = PAGES[label]
    name = label.removesuffix(" README")
    spec = available_providers().get(name)
    if spec is None:
        pytest.skip(f"provider {name!r} is not installed here")
    assert documented(page) == set(spec.options.model_fields), page.relative_to(REPO)


def test_every_provider_page_is_checked() -> None:
    # a page named after no provider would be skipped above for the wrong reason
    assert {label.removesuffix(" README") for label in PAGES} <= set(available_providers()) | {
        "kind",
        "kubeconfig",
        "cluster-api",
        "cluster-inventory",
    }


def test_the_guides_pyproject_is_the_example_providers_which_builds() -> None:
    # a provider author copies the guide's pyproject.toml and runs `pip install .`: without
    # `version` (or the package list) it did not build; the example distribution is built
    # and installed by the test command
    import tomllib

    guide = (REPO / "docs" / "writing-a-provider.md").read_text(encoding="utf-8")
    block = re.search(r"^```toml\n(.*?)^```", guide, flags=re.MULTILINE | re.DOTALL)
    assert block is not None, "the guide shows no pyproject.toml"
    shown = tomllib.loads(block.group(1))
    example = tomllib.loads(
        (REPO / "examples" / "third-party-provider" / "pyproject.toml").read_text(encoding="utf-8")
    )
    example["project"].pop("description")
    assert shown == example
