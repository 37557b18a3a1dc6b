"""The shell commands the docs show run mcruntime's modules with flags and provider options that exist.

.ci/check_snippets.py type-checks the Python snippets; the ```sh blocks a user copies are
checked here: every `python -m mcruntime...` command names a module that runs, each of its
`--flags` is one the module's `--help` lists, and each `--provider-option KEY=VALUE` is an
option the named provider validates (as `load_provider` would, without building it).
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import re
import shlex
import sys
import tomllib
from functools import cache
from pathlib import Path
from types import CodeType, ModuleType

import pytest

from mcruntime.cli import parse_provider_options
from mcruntime.plugins import ProviderError, available_providers, validate_options

REPO = Path(__file__).resolve().parents[2]
PAGES = [
    REPO / "README.md",
    *sorted((REPO / "docs").rglob("*.md")),
    *sorted(REPO.glob("providers/*/README.md")),
]
SH_BLOCK = re.compile(r"^```(?:sh|bash|shell)\n(.*?)^```", re.S | re.M)
FLAG = re.compile(r"^--[a-z][a-z0-9-]*")
SEPARATORS = {"&&", "||", "|", ";"}


def commands() -> list[tuple[str, list[str]]]:
    """(page, argv after `python -m`) of every mcruntime command in a shell block."""
    found = []
    for page in PAGES:
        for block in SH_BLOCK.findall(page.read_text(encoding="utf-8")):
            pending = ""
            for line in block.replace("\\\n", " ").splitlines():
                try:  # a quoted value may go on over lines (a JSON option)
                    words = shlex.split(pending + line, comments=True)
                except ValueError:
                    pending += line + "\n"
                    continue
                pending = ""
                cmd: list[str] = []
                for word in [*words, "&&"]:  # `a && b`, `a | b`: each command on its own
                    if word not in SEPARATORS:
                        cmd.append(word)
                        continue
                    if "<" in cmd or ">" in cmd:  # a redirection, and its file, are the shell's
                        cmd = cmd[: cmd.index(">" if ">" in cmd else "<")]
                    if cmd[:2] == ["python", "-m"] and cmd[2:3] and cmd[2].startswith("mcruntime"):
                        found.append((str(page.relative_to(REPO)), cmd[2:]))
                    cmd = []
    return found


def main_code(module: str) -> CodeType:
    """The code `python -m module` runs (read here: pytest's import hook cannot give it to runpy)."""
    spec = importlib.util.find_spec(module)
    assert spec is not None and spec.origin
    if spec.submodule_search_locations:  # a package: its __main__
        spec = importlib.util.find_spec(f"{module}.__main__")
        assert spec is not None and spec.origin
    return compile(Path(spec.origin).read_text(encoding="utf-8"), spec.origin, "exec")


def package(module: str) -> str:
    spec = importlib.util.find_spec(module)
    return module if spec and spec.submodule_search_locations else module.rpartition(".")[0]


@cache
def help_text(module: str, sub: str | None) -> str:
    """What `python -m module [sub] --help` prints (run in this process: argparse exits first)."""
    out = io.StringIO()
    argv, main = sys.argv, sys.modules["__main__"]
    sys.argv = [module, *([sub] if sub else []), "--help"]
    sys.modules["__main__"] = run = ModuleType("__main__")  # as runpy does: classes resolve there
    run.__package__ = package(module)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
            exec(main_code(module), run.__dict__)
    except SystemExit as exc:
        assert exc.code == 0, f"python -m {' '.join(sys.argv)} exited with {exc.code}"
    finally:
        sys.argv, sys.modules["__main__"] = argv, main
    return out.getvalue()


def usage(argv: list[str]) -> str:
    module, rest = argv[0], argv[1:]
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{module} is not installed here")
    sub = rest[0] if rest and not rest[0].startswith("-") else None
    if sub is not None:
        try:
            return help_text(module, sub)
        except AssertionError:  # a positional argument, not a subcommand
            pass
    return help_text(module, None)


COMMANDS = commands()


def test_the_docs_show_mcruntime_commands() -> None:
    # the collector must keep finding them: an empty list would pass every check below
    assert len(COMMANDS) > 20
    assert {argv[0] for _, argv in COMMANDS} >= {
        "mcruntime.examples.configmaps",
        "mcruntime.envtest",
        "mcruntime",
        "mcruntime_kubeconfig",
    }


@pytest.mark.parametrize(
    ("page", "argv"), COMMANDS, ids=lambda v: " ".join(v)[:70] if isinstance(v, list) else v
)
def test_every_flag_of_a_documented_command_exists(page: str, argv: list[str]) -> None:
    text = usage(argv)
    listed = set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", text))
    flags = {m.group(0) for word in argv[1:] if (m := FLAG.match(word))}
    assert flags <= listed, (
        f"{page}: python -m {' '.join(argv)}: not in its --help: {flags - listed}"
    )


@pytest.mark.parametrize(
    ("page", "argv"), COMMANDS, ids=lambda v: " ".join(v)[:70] if isinstance(v, list) else v
)
def test_every_provider_option_of_a_documented_command_is_valid(page: str, argv: list[str]) -> None:
    words = [w for arg in argv[1:] for w in (arg.split("=", 1) if arg.startswith("--") else [arg])]
    pairs = [words[i + 1] for i, w in enumerate(words[:-1]) if w == "--provider-option"]
    provider = next((words[i + 1] for i, w in enumerate(words[:-1]) if w == "--provider"), None)
    if not pairs:
        return
    default = re.search(
        r"--provider PROVIDER\s+cluster provider plugin \(default: ([\w-]+)", usage(argv)
    )
    name = provider or (default.group(1) if default else "")
    if name not in available_providers():
        pytest.skip(f"provider {name!r} is not installed here")
    validate_options(name, **parse_provider_options(pairs, provider=name))


def test_the_unknown_option_error_the_providers_page_shows_is_what_load_provider_says() -> None:
    page = (REPO / "docs" / "providers" / "index.md").read_text(encoding="utf-8")
    shown = re.search(r"```text\n(provider 'embedded': unknown option 'clustrs'.*)\n```", page)
    assert shown, "docs/providers/index.md no longer shows the error of an unknown option"
    with pytest.raises(ProviderError) as err:
        validate_options("embedded", clustrs=3)
    assert str(err.value) == shown.group(1)


def provider_names() -> dict[str, str]:
    """Every provider mcruntime and its distributions register, by the pyproject declaring it."""
    names = {}
    for pyproject in [REPO / "pyproject.toml", *sorted(REPO.glob("providers/*/pyproject.toml"))]:
        project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
        for name in project.get("entry-points", {}).get("mcruntime.providers", {}):
            names[name] = str(pyproject.relative_to(REPO))
    return names


@pytest.mark.parametrize(
    ("page", "link"),
    [
        ("docs/concepts/providers.md", "](../providers/{}.md)"),
        ("docs/providers/index.md", "]({}.md)"),
    ],
)
def test_every_provider_the_repository_ships_is_in_the_providers_tables(
    page: str, link: str
) -> None:
    text = (REPO / page).read_text(encoding="utf-8")
    missing = {n: src for n, src in provider_names().items() if link.format(n) not in text}
    assert not missing, f"{page} has no row for {missing}"
