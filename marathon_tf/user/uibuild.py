"""``marathon-tf local ui-install``: the Marathon web UI (mesosphere/marathon-ui 1.3.1), built on this
machine from its source release into ``<state home>/ui/build``, where ``local serve --ui`` finds it.

No package registry carries a built Marathon UI, and marathon-tf ships none: the source release is
downloaded (or given with ``--from-tarball``), its npm-shrinkwrap'ed dependencies installed with
npm, and it is built with its own ``npm run build`` (gulp, ``GULP_ENV=production``). Its 2016 tool
chain needs three build-only fixes on a current Node (the UI's own code is not changed):

* ``gulpfile.js``: the ``version-check`` task leaves the default build (it refuses any Node but
  5.4.1, the version in ``package.json``'s ``engines``);
* ``node_modules/vinyl-fs/node_modules/graceful-fs`` (graceful-fs 3, which re-evaluates Node's own
  ``fs`` source and fails on Node 12 and later) is removed, so vinyl-fs uses the top-level
  graceful-fs 4 the shrinkwrap also installs;
* babel-core 6.7's ``option-manager.js`` calls ``path.dirname(presetLoc)`` also for a preset given
  as an object, where ``presetLoc`` is undefined (a TypeError since Node 6): the preset's directory
  falls back to the options' own.

Needs node and npm, and the internet once (GitHub for the source, the npm registry for its
dependencies). Runs no code of ours in the browser; nothing here prints (``log`` callbacks).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from marathon_tf.contract.errors import MarathonTFError, UsageError

__all__ = ["UI_VERSION", "SOURCE_URL", "Fix", "FIXES_BEFORE_INSTALL", "FIXES_AFTER_INSTALL", "install", "UiBuildError"]

UI_VERSION = "1.3.1"
SOURCE_URL = f"https://github.com/mesosphere/marathon-ui/archive/refs/tags/v{UI_VERSION}.tar.gz"
#: How long npm may take for the install and for the build (seconds).
NPM_TIMEOUT = 1800.0
#: The largest source tarball downloaded: a bound on what a server that never stops sending can fill.
MAX_DOWNLOAD = 256 << 20


class UiBuildError(MarathonTFError):
    """A step of the build failed (exit 1); the message says which, and where its log is."""


@dataclass(frozen=True)
class Fix:
    """One build-only fix: in ``path`` (relative to the source tree), ``old`` becomes ``new``; ``new``
    None removes ``path`` (a folder). A fix whose ``old`` text is not there fails the build: the
    source is not the release these fixes are for."""

    path: str
    old: str | None
    new: str | None
    why: str

    def apply(self, root: Path) -> None:
        target = root / self.path
        if self.new is None:
            if target.is_dir():
                shutil.rmtree(target)
            return
        assert self.old is not None  # a fix that writes new text names the text it replaces
        text = target.read_text(encoding="utf-8") if target.is_file() else ""
        if self.old not in text:
            if self.new in text:
                return  # already applied
            raise UiBuildError(f"ui-install: {self.path} is not what marathon-ui {UI_VERSION}'s build has "
                               f"(the fix '{self.why}' does not apply): is this the {UI_VERSION} source release?")
        target.write_text(text.replace(self.old, self.new, 1), encoding="utf-8")


FIXES_BEFORE_INSTALL = (
    Fix("gulpfile.js", 'var tasks = [\n  "version-check",\n', "var tasks = [\n",
        "no version-check task: it refuses every Node but 5.4.1"),
)
FIXES_AFTER_INSTALL = (
    Fix("node_modules/vinyl-fs/node_modules/graceful-fs", None, None,
        "no nested graceful-fs 3 in vinyl-fs: it fails on Node 12 and later"),
    Fix("node_modules/babel-core/lib/transformation/file/options/option-manager.js",
        'dirname: _path2["default"].dirname(presetLoc)',
        'dirname: presetLoc ? _path2["default"].dirname(presetLoc) : dirname',
        "a null guard on the preset path in babel-core 6.7's option-manager"),
)


def _tools(npm: str) -> None:
    missing = [tool for tool in ("node", npm) if shutil.which(tool) is None]
    if missing:
        raise UsageError(f"ui-install needs {' and '.join(missing)} on PATH (to build the Marathon UI from source)",
                         hint="install Node.js with npm (any current version), e.g. from your package manager")


def _download(url: str, into: Path, log: Callable[[str], None], max_bytes: int = MAX_DOWNLOAD) -> Path:
    """The source release at ``url``, saved into ``into`` as it comes (streamed: a slow link may take long,
    each read within a minute), refused past ``max_bytes``."""
    import requests

    from marathon_tf.marathon import transport

    log(f"downloading {url}")
    path = into / f"marathon-ui-{UI_VERSION}.tar.gz"
    try:
        with transport.session(max_bytes=max_bytes) as s, s.get(url, stream=True, timeout=(10, 60)) as r:
            r.raise_for_status()
            length = r.headers.get("Content-Length", "")
            if length.isdigit() and int(length) > max_bytes:
                raise transport.AnswerTooLarge(max_bytes, int(length))
            size = 0
            with open(path, "wb") as f:
                for chunk in r.iter_content(1 << 20):
                    size += len(chunk)
                    if size > max_bytes:
                        raise transport.AnswerTooLarge(max_bytes)
                    f.write(chunk)
    except requests.RequestException as e:
        why = str(e) if isinstance(e, transport.AnswerTooLarge) else e.__class__.__name__
        raise UiBuildError(f"ui-install: cannot download {url}: {why}",
                           hint="it needs the internet once; or download the source release yourself and give it "
                                "with --from-tarball FILE") from None
    return path


def _extract(tarball: Path, into: Path) -> Path:
    """The source tree of ``tarball`` (one top folder, as GitHub's archives have), extracted safely."""
    try:
        with tarfile.open(tarball) as tar:
            names = [m.name for m in tar.getmembers()]
            tops = {n.split("/", 1)[0] for n in names if n and not n.startswith("pax_global_header")}
            tar.extractall(into, filter="data")  # no absolute paths, no '..', no devices
    except (tarfile.TarError, OSError) as e:
        raise UiBuildError(f"ui-install: {tarball} is not a readable source tarball: {e}") from None
    root = into / tops.pop() if len(tops) == 1 else into
    try:
        package = json.loads((root / "package.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        package = {}
    if package.get("name") != "marathon-ui" or package.get("version") != UI_VERSION:
        raise UiBuildError(f"ui-install: {tarball} is not marathon-ui {UI_VERSION}'s source "
                           f"(package.json says {package.get('name')!r} {package.get('version')!r})")
    return root


def _npm(npm: str, args: list[str], cwd: Path, logfile: Path, what: str, env: dict | None = None) -> None:
    with open(logfile, "ab") as out:
        out.write(f"\n$ {npm} {' '.join(args)}\n".encode())
        out.flush()
        try:
            code = subprocess.run([npm, *args], cwd=cwd, stdout=out, stderr=subprocess.STDOUT,
                                  stdin=subprocess.DEVNULL, env={**os.environ, **(env or {})},
                                  timeout=NPM_TIMEOUT).returncode
        except subprocess.TimeoutExpired:
            code = None
    if code != 0:
        tail = logfile.read_text(encoding="utf-8", errors="replace").strip().splitlines()[-1:] or [""]
        raise UiBuildError(f"ui-install: {what} failed ({'timed out' if code is None else f'exit {code}'}): "
                           f"{tail[0][:200]}", hint=f"the whole output is in {logfile}")


def install(ui_home: Path, *, tarball: Path | None = None, url: str = SOURCE_URL, npm: str = "npm",
            log: Callable[[str], None] = lambda line: None) -> Path:
    """Build the Marathon UI into ``<ui_home>/build`` (replacing an earlier build only once the new one
    is complete); returns that folder. ``tarball``: the source release already on this machine."""
    _tools(npm)
    ui_home.mkdir(parents=True, exist_ok=True)
    logfile = ui_home / "build.log"
    logfile.write_text("")
    with tempfile.TemporaryDirectory(prefix="source-", dir=ui_home) as work:
        work_dir = Path(work)
        source = Path(tarball) if tarball else _download(url, work_dir, log)
        log(f"extracting {source}")
        root = _extract(source, work_dir / "src")
        for fix in FIXES_BEFORE_INSTALL:
            fix.apply(root)
        log(f"installing its dependencies with npm (minutes; output in {logfile})")
        _npm(npm, ["install", "--no-audit", "--no-fund"], root, logfile, "npm install")
        for fix in FIXES_AFTER_INSTALL:
            fix.apply(root)
        log("building it (npm run build, GULP_ENV=production)")
        _npm(npm, ["run", "build"], root, logfile, "the build", env={"GULP_ENV": "production"})
        dist = root / "dist"
        if not (dist / "index.html").is_file() or not (dist / "main.js").is_file():
            raise UiBuildError("ui-install: the build made no dist/index.html and dist/main.js",
                               hint=f"its output is in {logfile}")
        staged = ui_home / "build.new"
        shutil.rmtree(staged, ignore_errors=True)
        shutil.copytree(dist, staged)
    final = ui_home / "build"
    shutil.rmtree(final, ignore_errors=True)
    staged.rename(final)
    return final


def remove(ui_home: Path, *, dry_run: bool = False) -> tuple[Path, int] | None:
    """Remove what ``ui-install`` left in ``ui_home`` (the build, its log, an unfinished build's
    folders): ``(ui_home, bytes)``, or None when there is nothing. npm's own download cache
    (``~/.npm``) is npm's: ``npm cache clean --force`` empties it."""
    if not ui_home.is_dir():
        return None
    size = sum(p.lstat().st_size for p in ui_home.rglob("*") if not p.is_dir())
    if not dry_run:
        shutil.rmtree(ui_home)
    return ui_home, size
