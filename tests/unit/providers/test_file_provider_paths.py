import logging

import pytest

from mcruntime.providers.file import Options, Provider, _context_hashes


def test_paths_expand_home_globs_and_directories(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "kc.yaml").write_text("{}")
    configs = tmp_path / "configs"
    configs.mkdir()
    for name in ("b.yaml", "a.yaml", ".hidden"):
        (configs / name).write_text("{}")
    provider = Provider(Options(paths=["~/kc.yaml", "~/configs", str(tmp_path / "*.yaml")]))
    assert provider._find() == [
        str(tmp_path / "kc.yaml"),
        str(configs / "a.yaml"),
        str(configs / "b.yaml"),
    ]


def _broken_context(user: str, name: str = "c") -> str:
    return (
        f"apiVersion: v1\nkind: Config\ncurrent-context: {name}\n"
        f"contexts: [{{name: {name}, context: {{cluster: nowhere, user: {user}}}}}]\n"
    )


def test_a_broken_context_warns_once_per_change_and_at_debug_level_while_unchanged(
    tmp_path, caplog
):
    caplog.set_level(logging.DEBUG, logger="mcruntime.providers.file")
    path = tmp_path / "kc.yaml"
    path.write_text(_broken_context("nobody"))
    provider = Provider(Options(paths=[str(path)]))
    for _ in range(3):
        provider.scan()
    levels = [r.levelname for r in caplog.records]
    assert levels == ["WARNING", "DEBUG", "DEBUG"]
    assert (
        caplog.records[0]
        .getMessage()
        .startswith(f"cluster={path}+c file provider: loading context 'c' failed: ")
    )
    assert "still failing (3)" in caplog.records[2].getMessage()
    # an edit is a new attempt by whoever edits the file: warned again, even if still broken
    caplog.clear()
    path.write_text(_broken_context("somebody"))  # another size: the scan reads it again
    provider.scan()
    provider.scan()
    assert [r.levelname for r in caplog.records] == ["WARNING", "DEBUG"]


def test_a_broken_file_removed_then_back_broken_is_warned_about_again(tmp_path, caplog):
    """Removing a file ends its failure streak: the same path broken again is a new
    failure (a warning), not the old streak's debug line."""
    caplog.set_level(logging.DEBUG, logger="mcruntime.providers.file")
    path = tmp_path / "kc.yaml"
    provider = Provider(Options(paths=[str(tmp_path)]))
    for _ in range(2):
        path.write_text("clusters: [this is: not: yaml\n")
        provider.scan()
        provider.scan()
        path.unlink()
        provider.scan()
    assert [r.levelname for r in caplog.records] == ["WARNING", "DEBUG", "WARNING", "DEBUG"]
    assert all(f"reading kubeconfig {path} failed" in r.getMessage() for r in caplog.records[::2])
    assert provider._streaks.failing() == []


def test_a_broken_context_taken_out_of_its_file_is_forgotten(tmp_path, caplog):
    caplog.set_level(logging.DEBUG, logger="mcruntime.providers.file")
    path = tmp_path / "kc.yaml"
    provider = Provider(Options(paths=[str(path)]))
    path.write_text(_broken_context("nobody"))
    provider.scan()
    path.write_text(_broken_context("nobody", "d"))  # context d instead of c
    provider.scan()
    assert provider._streaks.failing() == [("context", f"{path}+d")]
    assert list(provider._broken_contexts) == [f"{path}+d"]
    path.write_text(_broken_context("nobody"))  # the same broken context c back: warned again
    provider.scan()
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert [m.split(" file provider")[0] for m in warned] == [
        f"cluster={path}+c",
        f"cluster={path}+d",
        f"cluster={path}+c",
    ]


def test_files_that_are_gone_are_not_kept(tmp_path):
    """A directory whose kubeconfig files come and go (one per cluster) does not grow the
    provider's memory."""
    provider = Provider(Options(paths=[str(tmp_path)]))
    for i in range(20):
        (tmp_path / f"kc-{i}.yaml").write_text(_broken_context("nobody"))
        provider.scan()
        (tmp_path / f"kc-{i}.yaml").unlink()
    provider.scan()
    assert provider._files == {}
    assert provider._streaks.failing() == []


def test_a_path_that_does_not_exist_is_said_once_then_found_when_it_appears(tmp_path, caplog):
    """A mistyped path must not look like an empty fleet: one warning naming it, debug
    lines while it stays missing, and a line when it appears and is read."""
    caplog.set_level(logging.DEBUG, logger="mcruntime.providers.file")
    path = tmp_path / "fleet.yaml"
    provider = Provider(Options(paths=[str(path), str(tmp_path / "*.kc")]))
    for _ in range(3):
        provider.scan()
    assert [r.levelname for r in caplog.records] == ["WARNING", "DEBUG", "DEBUG"]
    assert (
        caplog.records[0]
        .getMessage()
        .startswith(
            f"file provider: finding {path} failed: no such file or directory; "
            "watched: its contexts engage when it appears"
        )
    )
    caplog.clear()
    path.write_text("{}")
    provider.scan()
    provider.scan()
    messages = [(r.levelname, r.getMessage()) for r in caplog.records]
    assert messages[0] == (
        "INFO",
        f"file provider: finding {path} works again after 3 failed attempts; reading it",
    )
    # a glob that matches nothing is not an error: a directory of kubeconfigs may be empty
    assert not [m for m in messages if "*.kc" in m[1]]


def test_an_empty_file_is_said_to_be_empty() -> None:
    # (it was "not a kubeconfig (top level is not a mapping)")
    with pytest.raises(ValueError, match="^the file is empty$"):
        _context_hashes(None)
