import logging

from mcruntime.providers.file import Options, Provider


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


def _broken_context(user: str) -> str:
    return (
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        f"contexts: [{{name: c, context: {{cluster: nowhere, user: {user}}}}}]\n"
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
