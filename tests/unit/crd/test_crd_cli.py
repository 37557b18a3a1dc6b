"""``python -m mcruntime crd``: CRDs of Resource classes as YAML or JSON."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
import textwrap
from typing import Any

import pytest
import yaml

from mcruntime.__main__ import main

pytestmark = pytest.mark.timeout(60)

FLAGS = """
from typing import ClassVar

from mcruntime.client import Model, Resource


class FlagSpec(Model):
    y: str = "n"
    n: int = 0
    on: str = "Off"


class Flag(Resource):
    api_version: ClassVar[str] = "flags.example.com/v1"
    kind: ClassVar[str] = "Flag"
    spec: FlagSpec = FlagSpec()
"""

MODELS = '''
from typing import ClassVar

from mcruntime.client import Model, Resource
from mcruntime.crd import CRDOptions


class CronSpec(Model):
    schedule: str
    """When to run, in cron syntax."""


class Cron(Resource):
    api_version: ClassVar[str] = "batch.example.com/v1"
    kind: ClassVar[str] = "Cron"
    crd_options: ClassVar[CRDOptions] = CRDOptions(short_names=("cr",))
    spec: CronSpec


class CronV1beta1(Resource):
    api_version: ClassVar[str] = "batch.example.com/v1beta1"
    kind: ClassVar[str] = "Cron"
    crd_options: ClassVar[CRDOptions] = CRDOptions(short_names=("cr",), storage=False)
    spec: CronSpec


class Alarm(Resource):
    api_version: ClassVar[str] = "batch.example.com/v1"
    kind: ClassVar[str] = "Alarm"

'''


@pytest.fixture
def models(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> pathlib.Path:
    (tmp_path / "cli_models_x.py").write_text(textwrap.dedent(MODELS))
    (tmp_path / "cli_flags_x.py").write_text(textwrap.dedent(FLAGS))
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def test_one_class_prints_one_crd_as_yaml(
    models: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["crd", "cli_models_x:Cron"]) == 0
    (crd,) = yaml.safe_load_all(capsys.readouterr().out)
    assert crd["metadata"]["name"] == "crons.batch.example.com"
    assert crd["spec"]["names"]["shortNames"] == ["cr"]
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert spec["properties"]["schedule"]["description"] == "When to run, in cron syntax."


def test_a_module_prints_a_crd_per_kind_with_its_versions_as_json(
    models: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["crd", "cli_models_x", "-o", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["apiVersion"], out["kind"]) == ("v1", "List")
    crons, alarms = out["items"]
    assert [v["name"] for v in crons["spec"]["versions"]] == ["v1", "v1beta1"]
    assert alarms["metadata"]["name"] == "alarms.batch.example.com"


def test_errors_name_the_target_and_exit_2(
    models: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["crd", "cli_models_x:CronSpec"]) == 2
    assert "error: 'cli_models_x:CronSpec' is not a mcruntime.client.Resource class" in (
        capsys.readouterr().err
    )
    assert main(["crd", "cli_models_x:Cron", "cli_models_x:CronV1beta1"]) == 0
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_info:
        main(["crd"])
    assert exit_info.value.code == 2


def test_python_dash_m_mcruntime_runs_the_command(models: pathlib.Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "mcruntime", "crd", "cli_models_x:Alarm"],
        cwd=models,
        capture_output=True,
        text=True,
        timeout=50,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert yaml.safe_load(done.stdout)["spec"]["names"]["kind"] == "Alarm"
    assert "&id" not in done.stdout  # no YAML anchors
    helped = subprocess.run(
        [sys.executable, "-m", "mcruntime", "crd", "--help"],
        capture_output=True,
        text=True,
        timeout=50,
        check=False,
    )
    assert helped.returncode == 0 and "module:Class" in helped.stdout


def test_words_kubectl_reads_as_booleans_are_quoted_in_the_yaml(
    models: pathlib.Path, capsys: pytest.CaptureFixture[str], envtest_server: Any
) -> None:
    # kubectl reads YAML 1.1: a field named y or a default of "n" unquoted became a boolean
    # (a property named "true", a required list that is not strings); what the server gets
    # from kubectl is the schema generate_crd made
    assert main(["crd", "cli_flags_x:Flag"]) == 0
    path = models / "flag.yaml"
    path.write_text(capsys.readouterr().out)
    kubeconfig = models / "kubeconfig"
    kubeconfig.write_text(json.dumps(envtest_server.kubeconfig()))
    out = subprocess.run(
        ["kubectl", "--kubeconfig", str(kubeconfig), "create", "--dry-run=server", "-o", "json"]
        + ["-f", str(path)],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout
    schema = json.loads(out)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    spec = schema["properties"]["spec"]
    assert sorted(spec["properties"]) == ["n", "on", "y"]
    assert spec["properties"]["y"]["default"] == "n"
    assert spec["properties"]["on"]["default"] == "Off"
