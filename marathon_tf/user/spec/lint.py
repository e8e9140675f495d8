"""Warnings about a valid job that will likely fail at run time (``validate``, ``deploy``).

A script the command names that no ``fetch`` brings and no volume holds (:func:`missing_scripts`): a task's
working directory is its sandbox, which holds only what was fetched (a typo such as ``trian.py`` would
otherwise only show at run time). And Keras 3 under the multi-worker strategies
(:mod:`marathon_tf.contract.keras3`). A job of style ``multi_worker_mirrored`` or ``parameter_server``
whose chief/worker environment does not route ``tf.keras`` to ``tf_keras`` (``TF_USE_LEGACY_KERAS``), on a
TensorFlow that ships Keras 3 (2.16 and later; an image tagged with an older version does not), is warned
about, unless its program can be read here (a ``fetch`` of this machine, or the code of a ``python3 -c CODE``
command) and uses no Keras. A program that imports ``keras`` itself gets Keras 3 whatever the environment
says, and is warned about too. Reads the job's own program files; no network, no TensorFlow.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from urllib.parse import unquote, urlparse

from marathon_tf.contract.keras3 import FIX, uses_legacy_keras
from marathon_tf.user.spec.model import JobSpec

__all__ = ["warnings", "missing_scripts", "STRATEGIES"]

#: The styles whose strategy Keras 3's model.fit does not run under.
STRATEGIES = {"multi_worker_mirrored": "MultiWorkerMirroredStrategy", "parameter_server": "ParameterServerStrategy"}
#: The name a ``python3 -c CODE`` program goes by in the warnings.
INLINE = "the command's python3 -c program"
#: Roles that run model.fit (a ps only serves variables).
_FIT_ROLES = ("chief", "worker")
_IMPORTS_KERAS = re.compile(r"^\s*(?:import\s+keras\b|from\s+keras\b)", re.MULTILINE)
_TF_KERAS = re.compile(r"\btf\.keras\b|\bfrom\s+tensorflow\s+import\s+keras\b|\btensorflow\.keras\b")
_TF_IMAGE_VERSION = re.compile(r"tensorflow[^/:]*:(\d+)\.(\d+)")


def _keras2_image(image: str | None) -> bool:
    """An image tagged with a TensorFlow before 2.16 (whose tf.keras is Keras 2)."""
    m = _TF_IMAGE_VERSION.search(image or "")
    return m is not None and (int(m.group(1)), int(m.group(2))) < (2, 16)


def _words(command) -> list[str]:
    if command is None:
        return []
    try:
        return list(command) if isinstance(command, tuple) else shlex.split(command)
    except ValueError:
        return []


def _scripts(command) -> list[str]:
    return [w for w in _words(command) if w.endswith(".py")]


def _inline(command) -> str | None:
    """The program of ``python3 -c CODE`` (the whole command, not a shell line around it), else None."""
    words = _words(command)
    if len(words) >= 3 and Path(words[0]).name.startswith("python") and words[1] == "-c":
        return words[2]
    return None


def _programs(spec: JobSpec, roles: list[str]) -> dict[str, str] | None:
    """The source of every Python script the roles' commands name, read from the job's own fetch
    files of this machine; None when one of them (or a ``python -m`` program) cannot be read here."""
    local = {}
    for f in spec.fetch:
        if f.client_path:
            path = Path(unquote(urlparse(f.uri).path))
            local[path.name] = path
    out: dict[str, str] = {}
    for role in roles:
        command = spec.roles[role].command if spec.roles[role].command is not None else spec.command
        inline = _inline(command)
        if inline is not None:  # `python3 -c CODE`: the program is in the job file itself
            out[INLINE] = inline
            continue
        scripts = _scripts(command)
        if not scripts:
            return None
        for script in scripts:
            found = local.get(Path(script).name)
            if found is None:
                return None
            try:
                out[found.name] = found.read_text(encoding="utf-8", errors="replace")
            except OSError:
                return None
    return out


_ARCHIVE = re.compile(r"\.(tar|tgz|tar\.gz|tbz2|tar\.bz2|txz|tar\.xz|zip|gz|bz2|xz)$")
_SHELL = {";", "&&", "||", "|", "cd", "&"}


def _script(command) -> str | None:
    """The Python script a command runs: the first ``*.py`` word after a ``python…`` word (or the command
    itself), as written; None for ``python -m``, ``-c``, or a shell line doing more than one thing."""
    words = _words(command)
    if not words or any(w in _SHELL for w in words):
        return None
    if words[0].endswith(".py"):
        return words[0]
    if not Path(words[0]).name.startswith("python"):
        return None
    for w in words[1:]:
        if w in ("-m", "-c"):
            return None
        if w.endswith(".py"):
            return w
        if not w.startswith("-"):
            return None
    return None


def missing_scripts(spec: JobSpec) -> list[str]:
    """One line per role whose command runs a relative ``*.py`` that no ``fetch`` brings into the sandbox
    and no volume holds (with the fetched file it most likely means). Only for a job that brings its
    program with ``fetch``; silent when a fetch is an archive (its contents are not known here) and when
    the job fetches nothing (the program may come with the image or the agent's machine)."""
    from marathon_tf.user.spec.hints import closest

    fetched = {}
    for f in spec.fetch:
        name = f.dest_path or Path(unquote(urlparse(f.uri).path)).name
        if f.extract and _ARCHIVE.search(name):
            return []
        fetched[name] = f
    out, seen = [], set()
    for role_name, role in spec.roles.items():
        if not role.count:
            continue
        command = role.command if role.command is not None else spec.command
        script = _script(command)
        if script is None or script.startswith(("/", "$", "~")) or script in seen:
            continue
        image = role.image or spec.image
        if not fetched:
            continue
        relative = script[2:] if script.startswith("./") else script
        if relative in fetched or any(relative.startswith(v.container_path.rstrip("/") + "/")
                                      for v in spec.volumes):
            continue
        seen.add(script)
        key = f"roles.{role_name}.command" if role.command is not None else "command"
        guess = closest(Path(relative).name, fetched)
        where = f"the fetched files ({', '.join(sorted(fetched))})"
        unless = (f"; unless image {image} puts it in the task's working directory (its sandbox), the program "
                  f"cannot start" if image else "; the program cannot start")
        out.append(f"{spec.source}: {key}: {script} is neither among {where} nor in a volume{unless}"
                   + (f": did you mean {guess}?" if guess else ""))
    return out


def warnings(spec: JobSpec) -> list[str]:
    """One line per likely run-time failure of a valid job, ``<file>: <key>: <what and the fix>``."""
    return missing_scripts(spec) + _keras3(spec)


def _keras3(spec: JobSpec) -> list[str]:
    """Keras 3's model.fit under a multi-worker strategy."""
    strategy = STRATEGIES.get(spec.style)
    if strategy is None:
        return []
    roles = [r for r in _FIT_ROLES if spec.roles[r].count and not _keras2_image(spec.roles[r].image or spec.image)]
    if not roles:
        return []
    keras3_env = [r for r in roles if not uses_legacy_keras({**spec.env, **spec.roles[r].env})]
    programs = _programs(spec, roles)
    fails = f"Keras 3's model.fit fails under {strategy} at run time"
    if programs is None:
        if not keras3_env:
            return []
        return [f"{spec.source}: env: style {spec.style}: if the program uses Keras, it gets Keras 3 "
                f"(TensorFlow 2.16 and later), and {fails}: {FIX}"]
    for name, source in sorted(programs.items()):
        if _IMPORTS_KERAS.search(source):
            where = "command: its python3 -c program" if name == INLINE else f"fetch {name}"
            return [f"{spec.source}: {where}: imports keras, which is Keras 3 whatever the environment, and "
                    f"{fails}: {FIX}"]
    uses = sorted(name for name, source in programs.items() if _TF_KERAS.search(source))
    if uses and keras3_env:
        return [f"{spec.source}: env: {', '.join(uses)} uses tf.keras, which is Keras 3 without TF_USE_LEGACY_KERAS, "
                f"and {fails}: {FIX}"]
    return []
