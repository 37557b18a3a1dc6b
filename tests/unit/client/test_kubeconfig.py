"""Kubeconfig loading: contexts, clear errors naming file and context, never the secrets."""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from mcruntime import Cluster, Manager
from mcruntime._kubeconfig import contexts, load_config, new_api_client
from mcruntime._noproxy import direct as _direct
from mcruntime.envtest import APIServer, Fleet
from mcruntime.errors import ConfigError

TOKEN = "s3cr3t-token-value-1234"


def _kubeconfig() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "dev",
        "clusters": [
            {
                "name": "dev-c",
                "cluster": {"server": "https://10.0.0.1:6443", "insecure-skip-tls-verify": True},
            },
            {
                "name": "prod-c",
                "cluster": {"server": "https://10.0.0.2:6443", "insecure-skip-tls-verify": True},
            },
        ],
        "users": [{"name": "me", "user": {"token": TOKEN}}],
        "contexts": [
            {"name": "dev", "context": {"cluster": "dev-c", "user": "me"}},
            {"name": "prod", "context": {"cluster": "prod-c", "user": "me"}},
            {"name": "broken", "context": {"cluster": "missing", "user": "me"}},
        ],
    }


def _write(tmp_path: Path, doc: Any, name: str = "config") -> Path:
    p = tmp_path / name
    p.write_text(doc if isinstance(doc, str) else yaml.safe_dump(doc))
    return p


def test_loads_current_context_and_named_context(tmp_path: Path) -> None:
    p = _write(tmp_path, _kubeconfig())
    assert load_config(path=p).host == "https://10.0.0.1:6443"
    cfg = load_config(path=str(p), context="prod")
    assert cfg.host == "https://10.0.0.2:6443"
    assert cfg.api_key["BearerToken"] == f"Bearer {TOKEN}"
    assert load_config(config_dict=_kubeconfig(), context="prod").host == "https://10.0.0.2:6443"
    assert contexts(p) == ["dev", "prod", "broken"] == contexts(_kubeconfig())


def test_a_dict_loaded_again_after_changes_is_read_as_it_is_now() -> None:
    """A dict's sections are indexed once for many loads: changes made between loads count."""
    doc = _kubeconfig()
    assert load_config(config_dict=doc, context="prod").host == "https://10.0.0.2:6443"
    # an entry replaced by another of the same name (a rotated token), the list kept
    doc["users"][0] = {"name": "me", "user": {"token": "rotated-token-5678"}}
    assert load_config(config_dict=doc, context="prod").api_key["BearerToken"] == (
        "Bearer rotated-token-5678"
    )
    # an entry changed in place
    doc["clusters"][1]["cluster"]["server"] = "https://10.0.0.9:6443"
    assert load_config(config_dict=doc, context="prod").host == "https://10.0.0.9:6443"
    # entries renamed in place, and moved
    doc["contexts"][1]["name"] = "production"
    assert load_config(config_dict=doc, context="production").host == "https://10.0.0.9:6443"
    with pytest.raises(ConfigError, match="'prod' not found.*available contexts: dev, production"):
        load_config(config_dict=doc, context="prod")
    doc["clusters"].reverse()
    doc["clusters"][0]["name"], doc["clusters"][1]["name"] = "dev-c", "prod-c"
    assert load_config(config_dict=doc, context="production").host == "https://10.0.0.1:6443"
    # entries added, and a section replaced by another list
    doc["contexts"].append({"name": "new", "context": {"cluster": "dev-c", "user": "me"}})
    assert load_config(config_dict=doc, context="new").host == "https://10.0.0.9:6443"
    doc["clusters"] = [{"name": "dev-c", "cluster": {"server": "https://10.0.0.3:6443"}}]
    assert load_config(config_dict=doc, context="dev").host == "https://10.0.0.3:6443"
    assert contexts(doc) == ["dev", "production", "broken", "new"]


def test_a_context_naming_its_cluster_or_user_by_a_non_string_is_a_config_error() -> None:
    doc = _kubeconfig()
    doc["contexts"][0]["context"]["cluster"] = ["dev-c"]
    with pytest.raises(ConfigError, match="refers to cluster \\['dev-c'\\], which is not defined"):
        load_config(config_dict=doc, context="dev")
    doc = _kubeconfig()
    doc["contexts"][0]["context"]["user"] = {"name": "me"}
    with pytest.raises(ConfigError, match="refers to user .*, which is not defined"):
        load_config(config_dict=doc, context="dev")


def test_kubeconfig_env_is_the_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBECONFIG", str(_write(tmp_path, _kubeconfig())))
    assert load_config().host == "https://10.0.0.1:6443"


def test_kubeconfig_list_merges_first_wins(tmp_path: Path) -> None:
    a = _kubeconfig()
    b = copy.deepcopy(a)
    b["current-context"] = "prod"
    b["clusters"][0]["cluster"]["server"] = "https://other:1"
    spec = f"{_write(tmp_path, a, 'a')}:{tmp_path / 'nope'}:{_write(tmp_path, b, 'b')}"
    assert load_config(path=spec).host == "https://10.0.0.1:6443"


def test_a_file_whose_name_holds_the_list_separator_is_read_as_that_file(tmp_path: Path) -> None:
    # kubectl --kubeconfig reads it whole; the file provider finds such names in a folder
    (tmp_path / "prod").mkdir()
    named = _write(tmp_path / "prod", _kubeconfig(), f"eu-1{os.pathsep}blue.yaml")
    assert load_config(path=named, context="prod").host == "https://10.0.0.2:6443"
    assert contexts(named) == ["dev", "prod", "broken"]
    # a list of files is still a list
    spec = f"{_write(tmp_path, _kubeconfig(), 'a')}{os.pathsep}{named}"
    assert load_config(path=spec).host == "https://10.0.0.1:6443"


def test_missing_file_names_the_path(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist") as err:
        load_config(path=tmp_path / "absent")
    assert str(tmp_path / "absent") in str(err.value)


def test_broken_yaml_names_file_and_line_not_content(tmp_path: Path) -> None:
    p = _write(tmp_path, f"users:\n- name: me\n  user: {{token: {TOKEN}: [\n")
    with pytest.raises(ConfigError) as err:
        load_config(path=p)
    assert str(p) in str(err.value) and "line" in str(err.value)
    assert TOKEN not in str(err.value)


def test_unknown_context_lists_the_available_ones(tmp_path: Path) -> None:
    p = _write(tmp_path, _kubeconfig())
    with pytest.raises(ConfigError) as err:
        load_config(path=p, context="staging")
    msg = str(err.value)
    assert "'staging'" in msg and str(p) in msg and "dev, prod, broken" in msg
    assert err.value.context == "staging" and err.value.path == str(p)
    assert TOKEN not in msg


def test_context_with_undefined_cluster(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cluster 'missing'"):
        load_config(path=_write(tmp_path, _kubeconfig()), context="broken")


def test_no_current_context(tmp_path: Path) -> None:
    doc = _kubeconfig()
    del doc["current-context"]
    with pytest.raises(ConfigError, match="no current-context.*dev, prod"):
        load_config(config_dict=doc)


@pytest.mark.parametrize("doc", ["", "- a\n- b\n", {"clusters": "nope", "current-context": "x"}])
def test_not_a_kubeconfig(tmp_path: Path, doc: Any) -> None:
    with pytest.raises(ConfigError):
        load_config(path=_write(tmp_path, doc))


def test_an_envtest_server_given_as_its_kubeconfig_is_a_type_error_saying_what_to_pass() -> None:
    # the slips of a test's set-up: the server itself, or its method not called
    server = APIServer("unstarted")
    with pytest.raises(
        TypeError,
        match=r"^expected a kubeconfig path or dict, got APIServer: pass its kubeconfig\(\)",
    ):
        Cluster.from_kubeconfig(server)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"got Fleet: pass its kubeconfig\(\)"):
        Cluster.from_kubeconfig(Fleet(1))  # type: ignore[arg-type]
    with pytest.raises(
        TypeError,
        match=r"^expected a kubeconfig path or dict, a kubernetes Configuration or a Cluster, "
        r"got method: call it, kubeconfig\(\), for the kubeconfig dict$",
    ):
        Manager(server.kubeconfig)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"Configuration or a Cluster, got int$"):
        Manager(6443)  # type: ignore[arg-type]


def test_loader_failures_never_echo_secrets() -> None:
    doc = _kubeconfig()
    doc["users"][0]["user"] = {"token": TOKEN, "client-certificate-data": TOKEN + "x"}
    with pytest.raises(ConfigError) as err:
        load_config(config_dict=doc)
    assert TOKEN not in str(err.value)
    assert "'dev'" in str(err.value)


def test_api_client_has_a_large_pool() -> None:
    client = new_api_client(load_config(config_dict=_kubeconfig()))
    try:
        assert client.configuration.connection_pool_maxsize >= 32
        assert client.user_agent.startswith("mcruntime/")
    finally:
        client.close()


def test_default_without_any_config_names_the_default_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    with pytest.raises(ConfigError, match=r"\.kube/config does not exist"):
        load_config()


def test_in_cluster_outside_a_pod_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from mcruntime.cluster import Cluster

    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with pytest.raises(ConfigError, match="in-cluster"):
        Cluster.in_cluster()


@pytest.mark.parametrize(
    ("server", "env", "proxy", "no_proxy"),
    [
        (
            "https://10.0.0.1:6443",
            {"HTTPS_PROXY": "http://tls:3128", "HTTP_PROXY": "http://plain:3128"},
            "http://tls:3128",
            "",
        ),
        (
            "http://10.0.0.1:8080",
            {"HTTPS_PROXY": "http://tls:3128", "HTTP_PROXY": "http://plain:3128"},
            "http://plain:3128",
            "",
        ),
        (
            "https://10.0.0.1:6443",
            {"https_proxy": "http://lower:3128", "HTTPS_PROXY": "http://upper:3128"},
            "http://lower:3128",
            "",
        ),
        (
            "https://10.0.0.1:6443",
            {"ALL_PROXY": "http://any:3128", "NO_PROXY": "10.0.0.0/8,.internal"},
            None,
            "",
        ),
        (
            "https://10.1.0.1:6443",
            {"ALL_PROXY": "http://any:3128", "NO_PROXY": "10.0.0.0/16,.internal"},
            "http://any:3128",
            "",
        ),
        ("https://10.0.0.1:6443", {}, None, ""),
        # Go: "requests to localhost or loopback addresses are never proxied"
        ("https://127.0.0.1:6443", {"HTTPS_PROXY": "http://tls:3128"}, None, ""),
        ("https://localhost:6443", {"https_proxy": "http://tls:3128"}, None, ""),
        ("https://[::1]:6443", {"HTTPS_PROXY": "http://tls:3128"}, None, ""),
    ],
)
def test_proxy_from_the_environment_for_the_servers_scheme(
    monkeypatch: pytest.MonkeyPatch,
    server: str,
    env: dict[str, str],
    proxy: str | None,
    no_proxy: str,
) -> None:
    # the choice is made at load, as Go's ProxyFromEnvironment makes it; no_proxy is left
    # empty so that the kubernetes client's own reading of it does not undo it
    for name in ("http_proxy", "https_proxy", "all_proxy", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    doc = _kubeconfig()
    doc["clusters"][0]["cluster"]["server"] = server
    cfg = load_config(config_dict=doc)
    assert (cfg.proxy, cfg.no_proxy or "") == (proxy, no_proxy)
    doc["clusters"][0]["cluster"]["proxy-url"] = "http://own:3128"
    assert load_config(config_dict=doc).proxy == "http://own:3128"


@pytest.mark.parametrize(
    ("proxy_url", "why"),
    [
        ("ftp://me:pa55word@proxy.corp:21", "has the scheme 'ftp'"),
        ("socks4://proxy.corp:1080", "has the scheme 'socks4'"),
        ("proxy.corp:3128", "has the scheme 'proxy.corp'"),
        ("//proxy.corp:3128", "has no scheme"),
        ("http://", "names no host"),
        ("http://me:pa55word@[::1:3128", "cannot be parsed (its host or port)"),
        ("http://me:pa55word@proxy.corp:notaport", "cannot be parsed (its host or port)"),
        ("http://proxy.corp:99999", "cannot be parsed (its host or port)"),
    ],
)
def test_a_proxy_url_kubectl_refuses_is_refused_at_load_naming_the_cluster(
    proxy_url: str, why: str
) -> None:
    doc = _kubeconfig()
    doc["clusters"][0]["cluster"]["proxy-url"] = proxy_url
    with pytest.raises(ConfigError) as err:
        load_config(config_dict=doc)
    assert str(err.value).startswith(
        f"cluster 'dev-c' of context 'dev' in kubeconfig <kubeconfig dict>: its proxy-url {why}"
    )
    assert "pa55word" not in str(err.value)


@pytest.mark.parametrize(
    ("server", "tls", "url"),
    [
        ("10.0.0.1:6443", True, "https://10.0.0.1:6443"),
        ("10.0.0.1:6443", False, "http://10.0.0.1:6443"),
        ("localhost:8080", False, "http://localhost:8080"),
        ("https://proxy.corp/k8s/clusters/c-1", True, "https://proxy.corp/k8s/clusters/c-1"),
    ],
)
def test_a_server_without_a_scheme_is_read_as_client_go_reads_it(
    server: str, tls: bool, url: str
) -> None:
    # https when the cluster has a CA or skips verification, else http (DefaultServerURL);
    # the kubernetes client sent it to ":80" with a FutureWarning
    doc = _kubeconfig()
    doc["clusters"][0]["cluster"] = {"server": server, "insecure-skip-tls-verify": tls}
    assert load_config(config_dict=doc).host == url


@pytest.mark.parametrize(
    ("server", "why"),
    [
        ("htps//me:pa55word@10.0.0.1:6443", "is neither a URL nor a host:port pair"),
        ("https://", "is neither a URL nor a host:port pair"),
        ("https://me:pa55word@[::1", "cannot be parsed (its host or port)"),
        ("https://me:pa55word@10.0.0.1:99999", "cannot be parsed (its host or port)"),
        ("ftp://me:pa55word@10.0.0.1", "has the scheme 'ftp': it must be https or http"),
        (6443, "is not a URL but a int"),
    ],
)
def test_a_server_that_is_no_url_is_refused_at_load_naming_the_cluster(
    server: Any, why: str
) -> None:
    doc = _kubeconfig()
    doc["clusters"][0]["cluster"]["server"] = server
    with pytest.raises(ConfigError) as err:
        load_config(config_dict=doc)
    assert str(err.value).startswith(
        f"cluster 'dev-c' of context 'dev' in kubeconfig <kubeconfig dict>: its server {why}"
    )
    assert "pa55word" not in str(err.value)


@pytest.mark.parametrize("scheme", ["socks5", "SOCKS5", "socks5h"])
def test_a_socks5_proxy_is_asked_for_the_server_by_name_as_client_go_asks_it(
    monkeypatch: pytest.MonkeyPatch, scheme: str
) -> None:
    doc = _kubeconfig()
    doc["clusters"][0]["cluster"]["proxy-url"] = f"{scheme}://me:pw@bastion:1080"
    assert load_config(config_dict=doc).proxy == "socks5h://me:pw@bastion:1080"
    del doc["clusters"][0]["cluster"]["proxy-url"]
    for name in ("https_proxy", "all_proxy", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    monkeypatch.setenv("HTTPS_PROXY", f"{scheme}://bastion:1080")
    assert load_config(config_dict=doc).proxy == "socks5h://bastion:1080"


def _impersonating(**fields: Any) -> dict[str, Any]:
    doc = _kubeconfig()
    doc["users"][0]["user"].update(fields)
    return doc


def test_a_users_impersonation_becomes_the_headers_client_go_sends() -> None:
    from mcruntime._kubeconfig import impersonation_headers

    cfg = load_config(
        config_dict=_impersonating(
            **{
                "as": "jane",
                "as-groups": ["devs", "auditors"],
                "as-uid": "1234",
                "as-user-extra": {"scopes/team": ["a", "b"]},
            }
        )
    )
    assert impersonation_headers(cfg) == (
        ("Impersonate-User", "jane"),
        ("Impersonate-Group", "devs"),
        ("Impersonate-Group", "auditors"),
        ("Impersonate-Uid", "1234"),
        ("Impersonate-Extra-scopes%2Fteam", "a"),
        ("Impersonate-Extra-scopes%2Fteam", "b"),
    )
    assert impersonation_headers(load_config(config_dict=_kubeconfig())) == ()


@pytest.mark.parametrize(
    ("fields", "says"),
    [
        ({"as-groups": ["devs"]}, "sets as-groups, as-uid or as-user-extra without as"),
        ({"as": "jane", "as-groups": "devs"}, "as-groups a list of strings"),
        ({"as": ["jane"]}, "as and as-uid must be strings"),
    ],
)
def test_an_impersonation_that_cannot_be_sent_is_a_config_error(
    fields: dict[str, Any], says: str
) -> None:
    with pytest.raises(ConfigError, match=says) as err:
        load_config(config_dict=_impersonating(**fields))
    assert "user 'me' of context 'dev'" in str(err.value)
    assert TOKEN not in str(err.value)


@pytest.mark.parametrize(
    ("token", "says"),
    [
        (TOKEN + "\n", "its token contains a line break"),
        (TOKEN + "\r\nX-Injected: yes", "its token contains a line break"),
        (TOKEN + "\x00", "its token contains a control character"),
        (TOKEN + "ü€", "its token contains a character outside latin-1"),
        ([TOKEN, "b"], "its token is a list, not a string"),
        (12345, "its token is a number, not a string"),
        ({"value": TOKEN}, "its token is a mapping, not a string"),
    ],
)
def test_a_token_that_cannot_be_sent_is_a_config_error_at_load(token: Any, says: str) -> None:
    # kubectl refuses a token that is not a string at load, and every call of a token an
    # HTTP header cannot carry; it was sent as "Bearer <ConfigNode ...>" or failed each call
    # as "connection closed mid-answer"
    doc = _kubeconfig()
    doc["users"][0]["user"] = {"token": token}
    with pytest.raises(ConfigError, match=says) as err:
        load_config(config_dict=doc)
    assert "user 'me' of context 'dev'" in str(err.value)
    assert TOKEN not in str(err.value) and "12345" not in str(err.value)


_OIDC = {"idp-issuer-url": "https://idp.example", "client-id": "c", "id-token": "t"}


@pytest.mark.parametrize(
    ("user", "cluster", "switch", "says"),
    [
        ({"exec": {"command": "/usr/bin/aws"}}, {}, "allow_exec", "runs the exec plugin 'aws'"),
        ({"auth-provider": {"name": "gcp"}}, {}, "allow_exec", "uses the auth-provider 'gcp'"),
        (
            {"tokenFile": "/var/run/secrets/t"},
            {},
            "allow_files",
            "'/var/run/secrets/t' (tokenFile)",
        ),
        ({"client-key": "/etc/k.pem"}, {}, "allow_files", "'/etc/k.pem' (client-key)"),
        ({"client-certificate": "/etc/c.pem"}, {}, "allow_files", "(client-certificate)"),
        (
            {"token": TOKEN},
            {"certificate-authority": "/etc/ca"},
            "allow_files",
            "cluster 'dev-c' of context 'dev'",
        ),
        (
            {
                "auth-provider": {
                    "name": "oidc",
                    "config": {**_OIDC, "idp-certificate-authority": "/e"},
                }
            },
            {},
            "allow_files",
            "the auth-provider of user 'me' of context 'dev' in kubeconfig <kubeconfig dict> "
            "reads the local file '/e' (idp-certificate-authority)",
        ),
    ],
)
def test_an_untrusted_kubeconfig_may_not_run_commands_or_read_files(
    user: dict[str, Any], cluster: dict[str, Any], switch: str, says: str
) -> None:
    doc = _kubeconfig()
    doc["users"][0]["user"] = user
    doc["clusters"][0]["cluster"].update(cluster)
    with pytest.raises(ConfigError) as err:
        load_config(config_dict=doc, allow_exec=False, allow_files=False)
    assert says in str(err.value) and f"({switch} is off" in str(err.value)
    assert "of context 'dev' in kubeconfig <kubeconfig dict>" in str(err.value)
    assert TOKEN not in str(err.value)
    # with this switch on and the other off, it passes this check
    other = {"allow_exec": switch == "allow_exec", "allow_files": switch == "allow_files"}
    try:
        load_config(config_dict=doc, **other)
    except ConfigError as exc:
        assert f"({switch} is off" not in str(exc)  # it may fail later: the files are not there
    with pytest.raises(ConfigError, match=f"{switch} is off"):
        load_config(config_dict=doc, **{switch: False})


@pytest.mark.parametrize(
    ("name", "says"),
    [
        ("gcp", 'client-go removed in 1.26 (kubectl refuses it too): use the "gke-gcloud-auth'),
        ("azure", "use the https://github.com/Azure/kubelogin exec credential plugin instead"),
        ("keystone", "names the auth-provider 'keystone', which has no provider"),
    ],
)
def test_an_auth_provider_kubectl_refuses_is_a_config_error_at_load(name: str, says: str) -> None:
    # the kubernetes loader would fetch a gcp or azure token with no deadline
    doc = _kubeconfig()
    doc["users"][0]["user"] = {"auth-provider": {"name": name, "config": {}}}
    with pytest.raises(ConfigError) as err:
        load_config(config_dict=doc)
    assert says in str(err.value)
    assert "user 'me' of context 'dev'" in str(err.value)


@pytest.mark.parametrize(
    "path", ["/nonexistent/ca.crt", "/etc/hostname", __file__, os.path.dirname(__file__)]
)
def test_an_untrusted_oidc_issuer_ca_file_is_refused_before_the_disk_is_read(path: str) -> None:
    # a Secret's writer who reads the logs learnt whether a path exists, and is a PEM CA,
    # from the error of reading it: the same refusal whatever the path is
    doc = _kubeconfig()
    config = {**_OIDC, "idp-certificate-authority": path}
    doc["users"][0]["user"] = {"auth-provider": {"name": "oidc", "config": config}}
    with pytest.raises(ConfigError) as err:
        load_config(config_dict=doc, allow_exec=False, allow_files=False)
    assert str(err.value) == (
        "the auth-provider of user 'me' of context 'dev' in kubeconfig <kubeconfig dict> reads "
        f"the local file {path!r} (idp-certificate-authority), and this kubeconfig may not read "
        "this process's files (allow_files is off; carry the content in "
        "idp-certificate-authority-data)"
    )


def test_an_untrusted_kubeconfig_may_use_oidc_which_uses_only_its_own_secrets() -> None:
    # gcp and azure would use this process's cloud credentials; oidc only the kubeconfig's
    doc = _kubeconfig()
    doc["users"][0]["user"] = {
        "auth-provider": {
            "name": "oidc",
            "config": {"idp-issuer-url": "https://idp.example", "client-id": "c", "id-token": "t"},
        }
    }
    cfg = load_config(config_dict=doc, allow_exec=False, allow_files=False)
    assert cfg.host == "https://10.0.0.1:6443"


@pytest.mark.parametrize(
    ("section", "entry", "name"),
    [
        ("clusters", {"name": "prod-c", "cluster": {"server": "https://10.9.9.9:6443"}}, "prod-c"),
        ("users", {"name": "me", "user": {"token": "DUPSECRET-second"}}, "me"),
        ("contexts", {"name": "dev", "context": {"cluster": "prod-c", "user": "me"}}, "dev"),
    ],
)
def test_a_duplicate_name_is_refused_as_kubectl_refuses_the_file(
    tmp_path: Path, section: str, entry: dict[str, Any], name: str
) -> None:
    # client-go's conversion of the named lists: 'duplicate name "me" in list', for the whole
    # file whichever context is loaded; it was first-wins, silently (another cluster, user)
    doc = _kubeconfig()
    doc[section].append(entry)
    path = _write(tmp_path, doc)
    loads = [
        lambda: load_config(path=path),
        lambda: load_config(path=path, context="prod"),
        lambda: contexts(path),
        lambda: load_config(config_dict=doc),
    ]
    for load in loads:
        with pytest.raises(ConfigError) as err:
            load()
        text = str(err.value)
        assert f"of {section} are both named {name!r}" in text, text
        assert "kubectl refuses such a file" in text
        assert TOKEN not in text and "DUPSECRET" not in text
        where = "<kubeconfig dict>" if load is loads[-1] else str(path)
        assert text.startswith(f"kubeconfig {where}: entries "), text


def test_a_duplicate_name_in_one_file_of_a_list_names_that_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = _kubeconfig(), _kubeconfig()
    second["users"].append({"name": "me", "user": {"token": "DUPSECRET"}})
    a, b = _write(tmp_path, first, "a"), _write(tmp_path, second, "b")
    monkeypatch.setenv("KUBECONFIG", f"{a}{os.pathsep}{b}")
    with pytest.raises(ConfigError) as err:
        load_config()
    assert f"kubeconfig {b}: entries 0 and 1 of users are both named 'me'" in str(err.value)
    # the same names across files: the first file's win, as in client-go
    monkeypatch.setenv("KUBECONFIG", f"{a}{os.pathsep}{_write(tmp_path, _kubeconfig(), 'c')}")
    assert load_config().host == "https://10.0.0.1:6443"


@pytest.mark.parametrize(
    ("url", "no_proxy", "direct"),
    [
        # golang.org/x/net/http/httpproxy's useProxy and its tests
        ("https://localhost:6443", "", True),
        ("https://127.0.0.1:6443", "", True),
        ("https://127.1.2.3", "", True),
        ("https://[::1]:6443", "", True),
        ("https://[::ffff:127.0.0.1]:6443", "", True),
        ("https://localhost.example:6443", "", False),
        ("https://10.0.0.1:6443", "*", True),
        ("https://10.0.0.1:6443", " 10.0.0.0/8 ", True),
        ("https://10.0.0.1:6443", "10.0.0.0/8:6443", False),  # no CIDR; no host:port either
        ("https://10.0.0.1:6443", "10.0.0.1", True),
        ("https://10.0.0.1:6443", "10.0.0.1:6443", True),
        ("https://10.0.0.1:6443", "10.0.0.1:443", False),
        ("https://10.0.0.1", "10.0.0.1:443", True),  # https's default port
        ("https://[fd00::1]:6443", "[fd00::1]:6443", True),
        ("https://[fd00::1]:6443", "fd00::1", True),
        ("https://[fd00::1]:6443", "fd00::/8", True),
        ("https://api.example.com:6443", "example.com", True),
        ("https://example.com:6443", "example.com", True),
        ("https://example.com:6443", ".example.com", False),  # subdomains only
        ("https://api.example.com:6443", ".example.com", True),
        ("https://example.com:6443", "*.example.com", False),
        ("https://api.example.com:6443", "*.example.com", True),
        ("https://notexample.com:6443", "example.com", False),
        ("https://api.example.com:6443", "example.com:6443", True),
        ("https://api.example.com:6443", "example.com:443", False),
        ("https://API.Example.com:6443", "EXAMPLE.COM", True),
        ("https://10.0.0.1:6443", "example.com,,10.0.0.2", False),
        ("https://example.com:6443", "10.0.0.0/8", False),  # a CIDR matches IP hosts only
    ],
)
def test_the_environments_proxy_is_skipped_as_go_skips_it(
    url: str, no_proxy: str, direct: bool
) -> None:
    assert _direct(url, no_proxy) is direct


@pytest.mark.parametrize("empty", ["", "# touched, nothing yet\n"])
def test_an_empty_file_of_a_kubeconfig_list_is_skipped_as_kubectl_skips_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, empty: str
) -> None:
    # `touch ~/.kube/config; KUBECONFIG=~/.kube/config:~/kind.yaml`: client-go's Load reads
    # no data as an empty config
    blank, real = tmp_path / "config", _write(tmp_path, _kubeconfig(), "kind.yaml")
    blank.write_text(empty)
    spec = f"{blank}{os.pathsep}{real}"
    monkeypatch.setenv("KUBECONFIG", spec)
    assert load_config().host == "https://10.0.0.1:6443"
    assert load_config(path=spec, context="prod").host == "https://10.0.0.2:6443"
    assert contexts(spec) == ["dev", "prod", "broken"]
    # alone, or with only empty ones, it is still said
    with pytest.raises(ConfigError, match=f"kubeconfig {blank} is empty"):
        load_config(path=blank)
    with pytest.raises(ConfigError, match="are all empty"):
        load_config(path=f"{blank}{os.pathsep}{blank}")


@pytest.mark.parametrize(
    ("user", "cluster", "field", "where"),
    [
        (
            {"token": TOKEN},
            {"certificate-authority": "ca.crt", "certificate-authority-data": "Q0FTRUNSRVQ="},
            "certificate-authority",
            "cluster 'dev-c' of context 'dev'",
        ),
        (
            {
                "client-certificate": "c.crt",
                "client-certificate-data": "Q0VSVFNFQ1JFVA==",
                "client-key-data": "S0VZU0VDUkVU",
            },
            {},
            "client-certificate",
            "user 'me' of context 'dev'",
        ),
        (
            {
                "client-certificate-data": "Q0VSVFNFQ1JFVA==",
                "client-key": "c.key",
                "client-key-data": "S0VZU0VDUkVU",
            },
            {},
            "client-key",
            "user 'me' of context 'dev'",
        ),
    ],
)
def test_a_file_beside_its_data_is_refused_as_kubectl_refuses_it(
    tmp_path: Path, user: dict[str, Any], cluster: dict[str, Any], field: str, where: str
) -> None:
    # client-go's validation: "certificate-authority-data and certificate-authority are both
    # specified"; the data silently won, and a wrong one read as the only CA being wrong
    doc = _kubeconfig()
    doc["users"][0]["user"] = user
    entry = doc["clusters"][0]["cluster"]
    if cluster:
        del entry["insecure-skip-tls-verify"]
    entry.update(cluster)
    with pytest.raises(ConfigError) as err:
        load_config(path=_write(tmp_path, doc))
    text = str(err.value)
    assert f"{where} in kubeconfig {tmp_path / 'config'} sets both {field} and {field}-data" in (
        text
    ), text
    assert "kubectl refuses it too" in text
    assert not any(s in text for s in (TOKEN, "Q0FT", "Q0VS", "S0VZ", "SECRET"))


def test_a_client_key_file_beside_its_data_without_a_certificate_is_left_to_other_checks() -> None:
    # client-go checks the key pair only for a user with a client certificate
    doc = _kubeconfig()
    doc["users"][0]["user"] = {"token": TOKEN, "client-key": "k", "client-key-data": "S0VZ"}
    assert load_config(config_dict=doc).host == "https://10.0.0.1:6443"


@pytest.mark.parametrize(
    "basic",
    [
        {"username": "admin", "password": "PWSECRET"},
        {"username": "admin"},
        {"password": "PWSECRET"},
    ],
)
def test_a_token_beside_a_username_or_password_is_refused_as_kubectl_refuses_it(
    basic: dict[str, str],
) -> None:
    # client-go: "more than one authentication method found ...; found [token basicAuth]"
    doc = _kubeconfig()
    doc["users"][0]["user"] = {"token": TOKEN, **basic}
    with pytest.raises(ConfigError) as err:
        load_config(config_dict=doc)
    text = str(err.value)
    assert text == (
        "user 'me' of context 'dev' in kubeconfig <kubeconfig dict> sets both a token and a "
        "username/password: more than one authentication method, which kubectl refuses too; "
        "keep one"
    )
    # a tokenFile is no token method for client-go's check
    doc["users"][0]["user"] = {"tokenFile": "/t", **basic}
    with pytest.raises(ConfigError) as err:
        load_config(config_dict=doc)
    assert "more than one" not in str(err.value)


@pytest.mark.parametrize(
    ("data", "says"),
    [
        (" Q0FTRUNSRVQ=", "is not base64: the character at byte 0 is not one of base64's "),
        ("Q0FT RUNSRVQ=", "(kubectl: illegal base64 data at input byte 4)"),
        ("Q0FTRUNSRVQ", "is not base64 (its padding is wrong)"),
        ("%%%%", "is not base64: the character at byte 0"),  # it said: holds no PEM certificate
        ("Q0FT\nRUNS\r\nRVQ=", "certificate-authority-data holds no PEM certificate"),  # decoded
    ],
)
def test_data_fields_are_base64_as_kubectl_reads_them(data: str, says: str) -> None:
    # Go's base64.StdEncoding (encoding/json's []byte): line breaks skipped, nothing else
    doc = _kubeconfig()
    entry = doc["clusters"][0]["cluster"]
    del entry["insecure-skip-tls-verify"]
    entry["certificate-authority-data"] = data
    with pytest.raises(ConfigError) as err:
        load_config(config_dict=doc)
    assert says in str(err.value), str(err.value)
    assert "cluster 'dev-c' of context 'dev'" in str(err.value)
    assert "Q0FT" not in str(err.value)
    doc["clusters"][0]["cluster"] = {"server": "https://10.0.0.1:6443"}
    doc["users"][0]["user"] = {"client-certificate-data": "Q0VS", "client-key-data": data}
    with pytest.raises(ConfigError) as err:
        load_config(config_dict=doc)
    assert "user 'me' of context 'dev'" in str(err.value)
