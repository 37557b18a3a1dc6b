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
