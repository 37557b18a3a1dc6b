import importlib.metadata
from collections.abc import Iterator

import pytest

from mcruntime.cli import add_arguments, parse_provider_options, provider_from_args
from mcruntime.errors import MCRuntimeError
from mcruntime.plugins import ProviderError, available_providers, load_provider, validate_options

BUILTINS = {"single", "clusters", "file", "namespace", "multi", "nop", "embedded"}


def test_builtin_providers_register_through_the_entry_point_group():
    assert set(available_providers()) >= BUILTINS


def test_unknown_provider_lists_the_installed_ones():
    with pytest.raises(ProviderError) as err:
        load_provider("no-such-provider")
    msg = str(err.value)
    assert "no-such-provider" in msg
    for name in BUILTINS:
        assert name in msg


def test_a_misspelt_provider_gets_a_suggestion():
    with pytest.raises(
        ProviderError, match=r"^unknown provider 'embeded'; did you mean 'embedded'\?"
    ):
        load_provider("embeded")


@pytest.fixture
def kind_not_installed(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The plugin registry as it is without the mcruntime-provider-kind distribution."""
    entry_points = importlib.metadata.entry_points

    def without_kind(**params: str) -> importlib.metadata.EntryPoints:
        return importlib.metadata.EntryPoints(e for e in entry_points(**params) if e.name != "kind")

    monkeypatch.setattr(importlib.metadata, "entry_points", without_kind)
    available_providers(reload=True)
    yield
    monkeypatch.undo()
    available_providers(reload=True)


@pytest.mark.usefixtures("kind_not_installed")
def test_a_provider_of_a_distribution_not_installed_says_how_to_install_it():
    # getting-started runs --provider kind: before, only "unknown provider 'kind'; installed
    # providers: ..." said nothing of the distribution to install
    with pytest.raises(ProviderError) as err:
        load_provider("kind", prefix="fleet-")
    assert str(err.value).endswith(
        "; 'kind' is a distribution of its own, mcruntime-provider-kind: "
        "pip install ./providers/kind from a checkout of mcruntime"
    )


def test_bad_option_names_the_option_and_the_provider():
    with pytest.raises(ProviderError) as err:
        validate_options("embedded", clusters="many")
    assert "'embedded'" in str(err.value) and "'clusters'" in str(err.value)
    with pytest.raises(ProviderError) as err:
        validate_options("file", pahts="x")
    assert "unknown option 'pahts'" in str(err.value) and "paths" in str(err.value)


@pytest.mark.parametrize(
    ("children", "said"),
    [
        (
            {"a#b": {"name": "nop"}},
            "provider 'multi': option 'providers': bad prefix 'a#b': must be non-empty and not "
            "contain '#' (options of 'multi': providers, separator)",
        ),
        (
            {"a": {"name": "nop"}, "b": {"name": "nosuch"}},
            "provider 'multi': option 'providers': child 'b': unknown provider 'nosuch'; "
            "installed providers: ",
        ),
        (
            {"a": {"name": "file", "options": {"bogus": 1}}},
            "provider 'multi': option 'providers': child 'a': provider 'file': unknown option "
            "'bogus'",
        ),
    ],
)
def test_a_bad_child_of_multi_is_named_with_its_prefix_and_the_option(children, said):
    # an option of multi, checked as every option is: never "failed to start"
    with pytest.raises(ProviderError) as err:
        load_provider("multi", providers=children)
    assert str(err.value).startswith(said)


def test_options_from_strings_are_coerced():
    opts = validate_options("embedded", clusters="5", prefix="eu")
    assert opts.clusters == 5 and opts.prefix == "eu"
    assert validate_options("file", paths="a.yaml,b.yaml").paths == ["a.yaml", "b.yaml"]


def test_cli_provider_options_repeat_into_lists_and_decode_json():
    assert parse_provider_options(["a=1", "b=x", "b=y", "c=true", "d-e=hi"]) == {
        "a": 1,
        "b": ["x", "y"],
        "c": True,
        "d_e": "hi",
    }
    with pytest.raises(ProviderError):
        parse_provider_options(["novalue"])


def test_cli_provider_options_reach_a_string_option_as_written():
    # "true", "2024", "[1]" are JSON, yet a string option (prefix) wants the text written
    opts = parse_provider_options(["prefix=2024", "clusters=2", "tls=false"], provider="embedded")
    assert opts == {"prefix": "2024", "clusters": 2, "tls": False}
    assert validate_options("embedded", **opts).prefix == "2024"
    assert parse_provider_options(["prefix=true"], provider="embedded") == {"prefix": "true"}
    assert parse_provider_options(["prefix=[1]"], provider="embedded") == {"prefix": "[1]"}
    # a value the option takes neither way, or an option the provider does not have: decoded,
    # and refused by the option's own words as before
    assert parse_provider_options(["history=[1]"], provider="embedded") == {"history": [1]}
    assert parse_provider_options(["nope=1"], provider="embedded") == {"nope": 1}


def test_the_cli_builds_a_provider_whose_string_option_looks_like_json():
    import argparse

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(
        [
            "--provider",
            "embedded",
            "--provider-option",
            "prefix=2024",
            "--provider-option",
            "clusters=0",
        ]
    )
    assert provider_from_args(args).options.prefix == "2024"


def test_nop_provider_knows_no_cluster():
    from mcruntime.errors import ClusterNotFound

    with pytest.raises(ClusterNotFound):
        load_provider("nop").get("x")


def test_local_cluster_choice(monkeypatch, tmp_path):
    import argparse

    from kubernetes.config import incluster_config

    from mcruntime.cli import add_arguments, wants_local_cluster

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    provider = object()
    assert wants_local_cluster(parser.parse_args([]), None)
    assert not wants_local_cluster(parser.parse_args([]), provider)
    assert wants_local_cluster(parser.parse_args(["--kubeconfig", "x"]), provider)
    assert wants_local_cluster(parser.parse_args(["--local-cluster", "yes"]), provider)
    assert not wants_local_cluster(parser.parse_args(["--local-cluster", "no"]), None)
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    for name, file in (("SERVICE_TOKEN_FILENAME", "token"), ("SERVICE_CERT_FILENAME", "ca.crt")):
        (tmp_path / file).write_text("x")  # a pod's mounted service account
        monkeypatch.setattr(incluster_config, name, str(tmp_path / file))
    assert wants_local_cluster(parser.parse_args([]), provider)


def test_no_provider_and_no_local_cluster_is_a_usage_error_not_the_default_kubeconfig(
    capsys: pytest.CaptureFixture[str],
) -> None:
    import argparse

    from mcruntime.cli import add_arguments, manager_from_args

    parser = argparse.ArgumentParser(prog="op")
    add_arguments(parser)
    args = parser.parse_args(["--provider", "none", "--local-cluster", "no"])
    with pytest.raises(SystemExit) as exited:
        manager_from_args(args, parser=parser)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "error: nothing to run: --provider none with --local-cluster no" in err, err
    assert "does not exist" not in err


def test_a_provider_spec_must_declare_the_provider_api_it_was_built_for():
    from pydantic import BaseModel

    from mcruntime.plugins import ProviderSpec

    with pytest.raises(TypeError, match="api_version"):
        ProviderSpec("x", BaseModel, lambda o: None)  # type: ignore[call-arg]
    assert ProviderSpec("x", BaseModel, lambda o: None, api_version="1.0").api_version == "1.0"


def test_a_provider_built_for_another_major_or_a_newer_minor_api_is_refused_with_the_reason():
    from mcruntime.plugins import incompatibility

    assert incompatibility("1.0", installed="1.2") is None
    assert incompatibility("1.2", installed="1.2") is None
    newer = incompatibility("1.3", installed="1.2")
    assert newer is not None and "built for provider API 1.3" in newer and "1.2" in newer
    other_major = incompatibility("2.0", installed="1.2")
    assert other_major is not None and "2.0" in other_major and "1.0 to 1.2" in other_major
    assert "not 'MAJOR.MINOR'" in (incompatibility("one", installed="1.0") or "")


def test_every_installed_provider_declares_a_compatible_api_version():
    from mcruntime.multicluster import PROVIDER_API_VERSION
    from mcruntime.plugins import incompatibility

    for name, spec in available_providers().items():
        assert incompatibility(spec.api_version) is None, name
        assert spec.api_version.split(".")[0] == PROVIDER_API_VERSION.split(".")[0]


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--provider", "nosuch"], "error: unknown provider 'nosuch'; installed providers: "),
        (
            ["--provider", "nop", "--provider-option", "bogus=1"],
            "error: provider 'nop': unknown option 'bogus'",
        ),
        (["--kubeconfig", "/nonexistent/config"], "error: kubeconfig /nonexistent/config does"),
    ],
)
def test_manager_from_args_reports_bad_arguments_as_argparse_does(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    import argparse

    from mcruntime.cli import add_arguments, manager_from_args

    parser = argparse.ArgumentParser(prog="op")
    add_arguments(parser)
    args = parser.parse_args(argv)
    with pytest.raises(SystemExit) as exit_:
        manager_from_args(args, parser=parser)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: op ")
    assert f"op: {says}" in err
    # without a parser, the error is raised for the program to handle
    with pytest.raises(MCRuntimeError):
        manager_from_args(args)


def test_provider_option_checks_say_what_kube_apiserver_would_refuse() -> None:
    from mcruntime.plugins import (
        dns_label_problems,
        dns_subdomain_problems,
        label_key_problems,
        label_selector_problem,
        label_value_problems,
    )

    assert label_key_problems("example.com/fleet") == []
    assert label_key_problems("bad label!")
    assert label_value_problems("prod") == [] and label_value_problems("prod eu")
    assert dns_subdomain_problems("fleet") == [] and dns_subdomain_problems("arn:aws:x/y")
    assert dns_label_problems("fleet") == [] and dns_label_problems("a.b") == [
        "must not contain dots"
    ]
    assert label_selector_problem("env in (prod,dev)") is None
    problem = label_selector_problem("env in prod")
    assert problem is not None and "expected '('" in problem
