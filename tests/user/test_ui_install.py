"""`marathon-tf local ui-install`: everything after the download, with a stand-in for npm (the real
build needs the npm registry and minutes: the closing note of issue 23 says what was run for real).
The source tree is a tiny stand-in for marathon-ui 1.3.1's, holding the lines the fixes change as
they are in that release (gulpfile.js; after `npm install`, vinyl-fs's nested graceful-fs 3 and
babel-core 6.7.0's option-manager.js)."""

import io
import json
import os
import signal
import subprocess
import sys
import tarfile
import textwrap

import pytest
import requests
from click.testing import CliRunner
from e2e_helpers import MARATHON_TF
from polling import wait_for
from werkzeug import Response

from marathon_tf.user import uibuild
from marathon_tf.user.cli import cli

#: gulpfile.js of marathon-ui v1.3.1, its default task list (the real file's last lines)
GULPFILE = textwrap.dedent('''\
    var tasks = [
      "version-check",
      "webpack",
      "less",
      "images",
      "fonts",
      "index"
    ];
    ''')
#: babel-core 6.7.0, lib/transformation/file/options/option-manager.js, in mergePresets
OPTION_MANAGER = 'this.mergeOptions({options: presetOpts, dirname: _path2["default"].dirname(presetLoc)});\n'

#: Stands in for npm: `install` lays out node_modules as the shrinkwrap would (with the two files the
#: fixes change), `run build` checks every fix was applied, then writes dist/ (or fails: FAKE_NPM_FAIL).
FAKE_NPM = textwrap.dedent(f'''\
    #!{sys.executable}
    import json, os, pathlib, sys
    calls = pathlib.Path(os.environ["FAKE_NPM_CALLS"])
    line = " ".join(sys.argv[1:]) + "\\n"
    calls.write_text(calls.read_text() + line if calls.exists() else line)
    root = pathlib.Path.cwd()
    if sys.argv[1] == "install":
        assert "version-check" not in (root / "gulpfile.js").read_text(), "version-check still in the build"
        nested = root / "node_modules/vinyl-fs/node_modules/graceful-fs"
        nested.mkdir(parents=True)
        (nested / "package.json").write_text(json.dumps({{"name": "graceful-fs", "version": "3.0.8"}}))
        om = root / "node_modules/babel-core/lib/transformation/file/options/option-manager.js"
        om.parent.mkdir(parents=True)
        om.write_text({OPTION_MANAGER!r})
        print("added 1234 packages")
    elif sys.argv[1:] == ["run", "build"]:
        assert os.environ.get("GULP_ENV") == "production"
        assert not (root / "node_modules/vinyl-fs/node_modules/graceful-fs").exists()
        om = (root / "node_modules/babel-core/lib/transformation/file/options/option-manager.js").read_text()
        assert "presetLoc ? _path2" in om, om
        if os.environ.get("FAKE_NPM_FAIL"):
            print("Error: Cannot find module 'x'")
            sys.exit(1)
        (root / "dist").mkdir()
        (root / "dist/index.html").write_text("<html><body>Marathon UI (stand-in)</body></html>")
        (root / "dist/main.js").write_text("// built")
    ''')


def _source_tarball(path, version="1.3.1"):
    files = {"package.json": json.dumps({"name": "marathon-ui", "version": version}), "gulpfile.js": GULPFILE,
             "npm-shrinkwrap.json": "{}"}
    with tarfile.open(path, "w:gz") as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(f"marathon-ui-{version}/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def _env(tmp_path, **more):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "npm").write_text(FAKE_NPM)
    (bin_dir / "node").write_text("#!/bin/sh\nexit 0\n")
    for tool in ("npm", "node"):
        os.chmod(bin_dir / tool, 0o755)
    return {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "MARATHON_TF_STATE_DIR": str(tmp_path / "state"),
            "FAKE_NPM_CALLS": str(tmp_path / "npm-calls"), **more}


def test_ui_install_from_a_tarball_applies_the_fixes_builds_and_local_serve_ui_finds_it(tmp_path):
    env = _env(tmp_path)
    r = CliRunner().invoke(cli, ["local", "ui-install", "--from-tarball", str(_source_tarball(tmp_path / "s.tgz"))],
                           env=env)
    assert r.exit_code == 0, r.output
    build = tmp_path / "state" / "ui" / "build"
    assert r.stdout.strip() == str(build)
    assert (tmp_path / "npm-calls").read_text().splitlines() == ["install --no-audit --no-fund", "run build"]
    assert (build / "index.html").read_text().startswith("<html>") and (build / "main.js").is_file()
    assert sorted(p.name for p in (tmp_path / "state" / "ui").iterdir()) == ["build", "build.log"]  # no leftovers

    # `local serve --ui` (no path) serves that build at /ui/
    proc = subprocess.Popen([MARATHON_TF, "local", "serve", "--ui", "--port", "0", "--dns-port", "0",
                             "--dns-http-port", "0"], env={**os.environ, **env}, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        first = proc.stderr.readline()
        assert first.startswith("Marathon API  http://127.0.0.1:"), first
        url = first.split()[2]
        page = wait_for(lambda: requests.get(f"{url}/ui/", timeout=5), 30, what="the UI served")
        assert page.status_code == 200 and "Marathon UI (stand-in)" in page.text
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        proc.wait(timeout=60)
        proc.stderr.close()


def test_ui_install_failures_are_one_line_and_keep_the_earlier_build(tmp_path):
    env = _env(tmp_path)
    r = CliRunner().invoke(cli, ["local", "ui-install", "--from-tarball", str(_source_tarball(tmp_path / "s.tgz"))],
                           env=env)
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(cli, ["local", "ui-install", "--from-tarball", str(_source_tarball(tmp_path / "s.tgz"))],
                           env={**env, "FAKE_NPM_FAIL": "1"})
    assert r.exit_code == 1 and r.stdout == ""
    errors = r.stderr.splitlines()[-2:]  # after the progress lines
    assert errors[0] == "error: ui-install: the build failed (exit 1): Error: Cannot find module 'x'"
    assert errors[1].startswith("hint: ") and "build.log" in errors[1]
    assert (tmp_path / "state" / "ui" / "build" / "index.html").is_file()  # the earlier build is still there
    r = CliRunner().invoke(cli, ["local", "ui-install", "--from-tarball",
                                 str(_source_tarball(tmp_path / "old.tgz", version="1.2.0"))], env=env)
    assert r.exit_code == 1 and "is not marathon-ui 1.3.1's source (package.json says 'marathon-ui' '1.2.0')" \
        in r.stderr


def test_ui_install_without_node_says_what_it_needs(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    r = CliRunner().invoke(cli, ["local", "ui-install"], env={"PATH": str(empty),
                                                                 "MARATHON_TF_STATE_DIR": str(tmp_path / "s")})
    assert r.exit_code == 2 and "ui-install needs node and npm on PATH" in r.stderr and "hint:" in r.stderr


def test_local_serve_ui_without_a_build_says_how_to_make_one(tmp_path):
    r = CliRunner().invoke(cli, ["local", "serve", "--ui", "--port", "0", "--dns-port", "0", "--dns-http-port", "0"],
                           env={"MARATHON_TF_STATE_DIR": str(tmp_path / "s")})
    assert r.exit_code == 2 and "--ui: no web UI build in" in r.stderr and "marathon-tf local ui-install" in r.stderr


def test_local_clean_ui_removes_the_build_and_only_with_ui(tmp_path):
    """Issue 43, item 8: a built UI (368 MB seen) stayed after every `local clean`. `local clean --ui` removes
    what ui-install left (saying how much); a plain `local clean` still keeps it."""
    env = _env(tmp_path)
    r = CliRunner().invoke(cli, ["local", "ui-install", "--from-tarball", str(_source_tarball(tmp_path / "s.tgz"))],
                           env=env)
    assert r.exit_code == 0, r.output
    ui = tmp_path / "state" / "ui"
    assert (ui / "build" / "index.html").is_file()
    kept = CliRunner().invoke(cli, ["local", "clean"], env=env)
    assert kept.exit_code == 0 and (ui / "build" / "index.html").is_file()
    dry = CliRunner().invoke(cli, ["local", "clean", "--ui", "--dry-run"], env=env)
    assert dry.exit_code == 0 and f"would remove {ui} (the web UI build" in dry.stdout and ui.is_dir()
    gone = CliRunner().invoke(cli, ["local", "clean", "--ui", "-o", "json"], env=env)
    assert gone.exit_code == 0 and not ui.exists()
    assert json.loads(gone.stdout)["ui"]["path"] == str(ui)
    again = CliRunner().invoke(cli, ["local", "clean", "--ui"], env=env)
    assert again.exit_code == 0 and f"no web UI build in {ui}" in again.stderr


def test_the_download_is_saved_as_it_comes_and_refused_past_its_limit(httpserver, tmp_path):
    tarball = os.urandom(3 << 20)
    httpserver.expect_request("/ui.tar.gz").respond_with_data(tarball, content_type="application/gzip")
    said: list[str] = []
    path = uibuild._download(httpserver.url_for("/ui.tar.gz"), tmp_path, said.append)
    assert path.read_bytes() == tarball and said == [f"downloading {httpserver.url_for('/ui.tar.gz')}"]
    with pytest.raises(uibuild.UiBuildError, match=r"larger than the 1 MiB limit \(Content-Length 3 MiB\)"):
        uibuild._download(httpserver.url_for("/ui.tar.gz"), tmp_path, said.append, max_bytes=1 << 20)

    def unannounced():  # no Content-Length: counted as it comes
        yield from (tarball[i:i + (1 << 16)] for i in range(0, len(tarball), 1 << 16))

    httpserver.expect_request("/chunked.tar.gz").respond_with_handler(
        lambda request: Response(unannounced(), content_type="application/gzip"))
    with pytest.raises(uibuild.UiBuildError, match=r"larger than the 1 MiB limit; it was not read"):
        uibuild._download(httpserver.url_for("/chunked.tar.gz"), tmp_path, said.append, max_bytes=1 << 20)
    httpserver.expect_request("/gone.tar.gz").respond_with_data("", status=404)
    with pytest.raises(uibuild.UiBuildError, match="cannot download .*: HTTPError"):
        uibuild._download(httpserver.url_for("/gone.tar.gz"), tmp_path, said.append)
