"""``python -m mcruntime crd``: CRDs of Resource classes as YAML or JSON."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
import textwrap

import pytest
import yaml

from mcruntime.__main__ import main

pytestmark = pytest.mark.timeout(60)

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
