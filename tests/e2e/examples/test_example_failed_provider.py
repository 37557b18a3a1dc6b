"""An example whose provider fails once it runs ends with the error, exit status 1."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mcruntime.examples import configmaps


@pytest.mark.timeout(60)
def test_a_provider_that_fails_ends_the_example_with_its_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("mcruntime_static")  # examples/third-party-provider
    missing = tmp_path / "eu.yaml"
    # docs/examples.md's third-party provider command, with a kubeconfig not there: the
    # provider reads it as it starts, so the manager stops with its error
    option = "clusters=" + json.dumps({"eu-1": str(missing)})
    assert configmaps.main(["--provider", "static", "--provider-option", option]) == 1
    # before: the ConfigError escaped main(), a second traceback after the manager's log
    err = capsys.readouterr().err
    assert f"error: kubeconfig {missing} does not exist\n" in err
