"""transport.session reads the environment's proxies and CA bundle once per origin (requests scans the whole
environment for each request), and merges them exactly as ``requests.Session`` does."""

from __future__ import annotations

import pytest
import requests

from marathon_tf.marathon import transport

URLS = ("http://marathon.example:8080/v2/apps", "http://marathon.example:8080/v2/queue",
        "https://master.example/state", "http://127.0.0.1:5050/x", "http://inside.corp:80/y", "http://127.0.0.1:9/z")


@pytest.mark.parametrize("env", [
    {},
    {"HTTP_PROXY": "http://proxy:3128", "HTTPS_PROXY": "http://sproxy:3128", "NO_PROXY": "127.0.0.1,.corp"},
    {"http_proxy": "http://p:1", "REQUESTS_CA_BUNDLE": "/etc/ca.pem"},
    {"ALL_PROXY": "socks5://s:1080", "CURL_CA_BUNDLE": "/c.pem", "no_proxy": "master.example"},
])
@pytest.mark.parametrize("asked", [
    ({}, None, True, None), ({"no_proxy": "marathon.example"}, False, None, None),
    ({"http": "http://mine:1"}, True, False, ("c", "k")), (None, None, "/mine.pem", None)])
def test_the_settings_of_a_request_are_those_requests_would_merge(monkeypatch, env, asked):
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    ours, theirs = transport.session(), requests.Session()
    ours.proxies, theirs.proxies = {"https": "http://session:1"}, {"https": "http://session:1"}
    for url in URLS + URLS:  # the second time from what was read the first
        proxies, stream, verify, cert = asked
        got = ours.merge_environment_settings(url, dict(proxies) if proxies is not None else None, stream, verify, cert)
        want = theirs.merge_environment_settings(url, dict(proxies) if proxies is not None else None, stream, verify,
                                                 cert)
        assert got == want, (url, env, asked)
    ours.trust_env = theirs.trust_env = False
    assert ours.merge_environment_settings(URLS[0], {}, None, True, None) == theirs.merge_environment_settings(
        URLS[0], {}, None, True, None)


def test_the_environment_is_read_once_per_origin(monkeypatch):
    reads: list[str] = []
    real = transport.get_environ_proxies
    monkeypatch.setattr(transport, "get_environ_proxies", lambda url, no_proxy=None: reads.append(url) or real(
        url, no_proxy=no_proxy))
    session = transport.session()
    for url in URLS + URLS:
        session.merge_environment_settings(url, {}, None, True, None)
    assert reads == list(dict.fromkeys(u for u in URLS if "queue" not in u))  # one origin, one read
