"""The package's layout: one subpackage per side, and imports that go one way only.

``marathon_tf/`` is three programs that run in different places (the user's machine, every
Marathon task, the local cluster), the Marathon client two of them use, the Mesos model two of them
use, and the contract all of them share (see ``marathon_tf/__init__.py``). This test reads every
module's imports (also those inside functions, which run later but still tie the sides together)
and holds them to:

* ``contract`` imports nothing else of marathon_tf;
* ``marathon`` (the REST client, events, the job's record) only ``contract``;
* ``mesos`` (the Mesos model: resources, agents, offers, Marathon's offer matching; pure) only
  ``contract``;
* ``task`` never imports the user's side (no CLI, no output, no job file in a task) nor the local
  cluster;
* ``local`` knows marathon-tf only through ``contract``, as a real Mesos agent knows nothing of it,
  and plays Mesos with the ``mesos`` model;
* ``user`` reaches into ``task`` only for the ``bootstrap`` verb and the pre-warmed interpreters it
  hands the local cluster; it models Mesos with ``mesos``, never with the local cluster's modules
  (production admission never imports the imitation).

It also keeps modules to one concern: none over 600 lines unless its docstring says why; and no two
modules import each other, directly or round a longer loop (an import cycle), inside functions or not.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "marathon_tf"
SIDES = ("contract", "marathon", "mesos", "task", "user", "local")

#: side -> the sides its modules may import (itself included)
ALLOWED = {
    "contract": {"contract"},
    "marathon": {"contract", "marathon"},
    "mesos": {"contract", "mesos"},
    "task": {"contract", "marathon", "task"},
    "local": {"contract", "local", "mesos"},
    "user": {"contract", "marathon", "mesos", "local", "user", "task"},
}
#: the only task modules the user's side may import
USER_MAY_USE_OF_TASK = {"marathon_tf.task.bootstrap", "marathon_tf.task.warmpool"}
#: the local cluster's modules that once held what is now the Mesos model: the user's side models
#: Mesos with :mod:`marathon_tf.mesos` (it may still import ``local`` to start a local cluster)
LOCAL_NOT_FOR_USER = ("marathon_tf.local.placement", "marathon_tf.local.resources", "marathon_tf.local.agents")
MAX_LINES = 600
#: Import cycles that exist today outside task/, each as the set of its modules (a cycle found is allowed
#: when all its modules are in one of these). None is allowed in task/.
KNOWN_CYCLES = [
    # local/ (i27-mesos' side of issue 27)
    {"marathon_tf.local.agentloss", "marathon_tf.local.scheduler"},
]


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(source: str, name: str, is_package: bool) -> list[tuple[int, str]]:
    """``(line, module)`` for every marathon_tf module the source imports, relative imports resolved;
    ``from package import module`` names the module."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names if a.name.split(".")[0] == "marathon_tf"]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_package else name.split(".")[:-1]
                base = base[:len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "marathon_tf":
                continue
            for alias in node.names:  # a module of a package, or a name of the target module
                module = f"{target}.{alias.name}"
                path = PACKAGE.parent / module.replace(".", "/")
                out.append((node.lineno, module if path.with_suffix(".py").exists() or path.is_dir() else target))
    return out


def side_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in SIDES else None


def violations(name: str, source: str, is_package: bool = False) -> list[str]:
    """Every import of module ``name`` that goes against the directions above, as one line each."""
    side = side_of(name)
    if side is None:
        return []
    out = []
    for line, target in imported_modules(source, name, is_package):
        other = side_of(target)
        if target == "marathon_tf":  # the package's face: __version__
            continue
        if other is None:
            out.append(f"{name}:{line} imports {target}, which is no side's (an entry point)")
            continue
        if other not in ALLOWED[side]:
            out.append(f"{name}:{line} ({side}) imports {target} ({other})")
        elif side == "user" and other == "task" and target not in USER_MAY_USE_OF_TASK \
                and not any(target.startswith(m + ".") for m in USER_MAY_USE_OF_TASK):
            out.append(f"{name}:{line} (user) imports {target}: the user's side uses only "
                       f"{', '.join(sorted(USER_MAY_USE_OF_TASK))} of the task side")
        elif side == "user" and any(target == m or target.startswith(m + ".") for m in LOCAL_NOT_FOR_USER):
            out.append(f"{name}:{line} (user) imports {target}: production admission never imports the "
                       f"imitation; the Mesos model is marathon_tf.mesos")
    return out


def modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def test_the_package_shows_its_sides():
    top = sorted(p.name for p in PACKAGE.iterdir() if not p.name.startswith(("_", ".")) or p.name == "__init__.py")
    assert top == ["__init__.py", "bootstrap.py", "cli.py", "contract", "local", "marathon", "mesos", "py.typed",
                   "task", "user"]
    for side in SIDES:
        doc = ast.get_docstring(ast.parse((PACKAGE / side / "__init__.py").read_text()))
        assert doc, f"marathon_tf/{side}/__init__.py must say what the side is"


def test_imports_go_one_way():
    found = []
    for path in modules():
        found += violations(module_name(path), path.read_text(), path.name == "__init__.py")
    assert found == [], "imports against the layout:\n" + "\n".join(found)


def test_the_users_side_never_imports_the_local_clusters_model_of_mesos():
    found = []
    for path in sorted((PACKAGE / "user").rglob("*.py")):
        name = module_name(path)
        found += [f"{name}:{line} imports {target}" for line, target in
                  imported_modules(path.read_text(), name, path.name == "__init__.py")
                  if any(target == m or target.startswith(m + ".") for m in LOCAL_NOT_FOR_USER)]
    assert found == [], "production admission imports the imitation:\n" + "\n".join(found)


#: all the Mesos model imports besides itself and ``contract``: no I/O, no threads, no clock (collections.abc: typing)
MESOS_MAY_USE = {"__future__", "collections", "dataclasses", "itertools", "math", "re", "typing"}


def test_the_mesos_model_is_pure():
    found = []
    for path in sorted((PACKAGE / "mesos").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
            found += [f"{path.name}:{node.lineno} imports {n}" for n in names
                      if n.split(".")[0] not in MESOS_MAY_USE and n.split(".")[0] != "marathon_tf"]
    assert found == [], "the Mesos model is pure (see marathon_tf/mesos/__init__.py):\n" + "\n".join(found)


@pytest.mark.parametrize("name, source", [
    ("marathon_tf.task.supervisor", "def f():\n    from marathon_tf.user import output\n"),
    ("marathon_tf.task.bootstrap", "from marathon_tf.user.cli import main\n"),
    ("marathon_tf.task.rendezvous.leader", "from ...user import output\n"),
    ("marathon_tf.local.launcher", "from marathon_tf.task.prewarm import SOCKET_VAR\n"),
    ("marathon_tf.local.cluster", "from ..task import warmpool\n"),
    ("marathon_tf.contract.naming", "import marathon_tf.marathon.client\n"),
    ("marathon_tf.marathon.client", "from marathon_tf.user import watch\n"),
    ("marathon_tf.user.jobs", "from marathon_tf.task.policy import decide\n"),
    ("marathon_tf.mesos.placement", "from marathon_tf.local.agents import Agent\n"),
    ("marathon_tf.mesos.views", "from ..marathon import shapes\n"),
    ("marathon_tf.user.admission", "from marathon_tf.local.placement import match\n"),
    ("marathon_tf.user.capacity", "from marathon_tf.local import agents\n"),
    ("marathon_tf.task.bootstrap", "from marathon_tf.mesos import resources\n"),
])
def test_the_check_catches_an_import_against_the_layout(name, source):
    assert violations(name, source), f"{name}: {source!r} should have been refused"


@pytest.mark.parametrize("name, source", [
    ("marathon_tf.task.bootstrap",
     "from marathon_tf.contract import naming\nfrom marathon_tf.marathon.client import Client\n"),
    ("marathon_tf.local.launcher",
     "from marathon_tf.contract.taskenv import PREWARM_SOCKET_VAR\nfrom . import reaper\n"),
    ("marathon_tf.user.cli.in_task", "from marathon_tf.task import bootstrap\n"),
    ("marathon_tf.user.cli.local",
     "from marathon_tf.local import serve\nfrom marathon_tf.task.warmpool import WarmPool\n"),
    ("marathon_tf.local.scheduler", "from marathon_tf.mesos.placement import match\nfrom ..mesos import resources\n"),
    ("marathon_tf.user.admission", "from marathon_tf.mesos.placement import Match, match\n"),
    ("marathon_tf.mesos.placement", "from .agents import AgentInfo\nfrom marathon_tf.contract import errors\n"),
])
def test_the_check_lets_the_allowed_imports_through(name, source):
    assert violations(name, source) == []


def test_no_module_is_long_without_saying_why():
    long = []
    for path in modules():
        source = path.read_text()
        lines = source.count("\n")
        if lines > MAX_LINES and f"{MAX_LINES} lines" not in (ast.get_docstring(ast.parse(source)) or ""):
            long.append(f"{path.relative_to(PACKAGE.parent)}: {lines} lines")
    assert long == [], "split these along their seams, or say in the docstring why not:\n" + "\n".join(long)


def import_graph() -> dict[str, set[str]]:
    """module -> the package's modules it imports (at the top or inside functions; a package is its
    ``__init__``)."""
    sources = {module_name(p): p for p in modules()}
    graph: dict[str, set[str]] = {}
    for name, path in sources.items():
        found = imported_modules(path.read_text(), name, path.name == "__init__.py")
        graph[name] = {target for _, target in found if target in sources and target != name}
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle (``a -> b -> ... -> a``) of every group of modules that import each other round a
    loop (the strongly connected components of more than one module, Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.add(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(group)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return [_loop(graph, group) for group in groups]


def _loop(graph: dict[str, set[str]], group: set[str]) -> list[str]:
    """A shortest way from the group's first module back to itself, within the group."""
    start = min(group)
    paths = {start: [start]}
    todo = [start]
    while todo:
        v = todo.pop(0)
        for w in sorted(graph[v] & group):
            if w == start:
                return paths[v] + [start]
            if w not in paths:
                paths[w] = paths[v] + [w]
                todo.append(w)
    raise AssertionError(f"no loop in {group}")  # pragma: no cover


def test_no_import_cycles():
    cycles = [c for c in import_cycles(import_graph())
              if not any(set(c) <= known for known in KNOWN_CYCLES)]
    assert cycles == [], "import cycles (break them: move the shared part to a module both import):\n" + "\n".join(
        " -> ".join(c) for c in cycles)


def test_no_allowance_for_the_task_side():
    assert not any(m.startswith("marathon_tf.task") for known in KNOWN_CYCLES for m in known)


def test_the_cycle_check_finds_a_cycle_through_an_import_inside_a_function():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert import_cycles(graph) == [["a", "b", "c", "a"]]
    source = "def f():\n    from marathon_tf.task.keeper import Keeper\n"
    assert imported_modules(source, "marathon_tf.task.policy", False) == [(2, "marathon_tf.task.keeper")]


def unlisted(package: Path, doc: str) -> list[str]:
    """The modules and subpackages of ``package`` that its docstring's table does not name (as
    ````name````, ````name.py```` or ``:mod:`.name```; a subpackage as ````name/…````)."""
    missing = [p.stem for p in sorted(package.glob("*.py")) if p.name != "__init__.py"
               and not re.search(rf"``{p.stem}(\.py)?``|:mod:`\.{p.stem}`", doc)]
    missing += [f"{p.name}/" for p in sorted(package.iterdir())
                if (p / "__init__.py").exists() and f"``{p.name}/" not in doc]
    return missing


@pytest.mark.parametrize("package", sorted(p.parent.relative_to(PACKAGE.parent).as_posix()
                                           for p in PACKAGE.rglob("__init__.py") if "__pycache__" not in p.parts))
def test_every_package_lists_every_module_it_has(package):
    init = PACKAGE.parent / package / "__init__.py"
    missing = unlisted(init.parent, ast.get_docstring(ast.parse(init.read_text())) or "")
    assert missing == [], f"{package}/__init__.py's table does not name: {', '.join(missing)}"


def test_the_table_check_finds_a_module_left_out(tmp_path):
    (tmp_path / "__init__.py").write_text("")
    for name in ("alpha", "beta", "gamma"):
        (tmp_path / f"{name}.py").write_text("")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "__init__.py").write_text("")
    assert unlisted(tmp_path, "``alpha``  one\n``beta.py``  two\n``sub/``  three") == ["gamma"]
    assert unlisted(tmp_path, ":mod:`.alpha`, :mod:`.beta`, ``gamma``") == ["sub/"]
    assert unlisted(tmp_path, "``alphabet`` ``betamax``") == ["alpha", "beta", "gamma", "sub/"]


#: What a comment citing a file outside this repository looks like: the project's shared material (a facts
#: sheet, the API examples, the background notes) is not shipped with the package.
OUTSIDE = re.compile(r"/work/|\.\./shared\b|\bshared/(marathon-api|background|marathon-ui)\b|\bFACTS(\.md)?\b")


def test_no_comment_cites_a_file_outside_the_repository():
    """Issue 39 item 5: a reader of the package cannot follow a citation of a file that is not in it. Upstream
    sources are cited by repository, tag and file; this repository's files by their path."""
    found = [f"{path.relative_to(PACKAGE.parent)}:{n}: {line.strip()[:100]}"
             for path in modules() for n, line in enumerate(path.read_text().splitlines(), 1) if OUTSIDE.search(line)]
    assert found == [], "\n".join(found)


def test_the_citation_check_finds_one():
    assert OUTSIDE.search("(FACTS §1.3)") and OUTSIDE.search("see /work/shared/background/TF_RUNTIME.md")
    assert OUTSIDE.search("``../shared/marathon-ui/build``") and not OUTSIDE.search("docs/restarts.md")


#: What a citation of upstream source looks like: a Scala, Go, C/C++, Java, protobuf or RAML file, Marathon's
#: ``M@1.11:`` / Mesos's ``Mesos@1.11.x:`` shorthand, a branch (``@releases/1.11``, ``releases/1.8``), a tag with a
#: path or line (``v1.4.3:``), ``owner/repo@ref``, ``name@<commit>``, ``owner/repo#<pull>``, ``src/main/scala``.
UPSTREAM = re.compile(  # each alternative starts with a character, the boundaries after it: one quick scan a module
    r"\.(?<=\w\.)(?<!\bself\.)(?<!\bcls\.)(?:scala|go|cpp|hpp|cc|h|java|proto|raml)\b"
    r"|M(?<!\wM)(?:esos)?@\d"
    r"|releases/\d|@releases/"
    r"|v(?<!\wv)\d+\.\d+\.\d+:(?=[\w.:])"
    r"|/(?<=[\w.-]/)[\w.-]+(?:@[\w.]|#\d)"
    r"|@(?<=[\w.-]@)[0-9a-f]{7,40}\b"
    r"|src/main/(?:scala|proto|java)\b")


def upstream_citations(source: str) -> list[tuple[int, str]]:
    """``(line, text)`` of every comment and docstring line of ``source`` that cites upstream source
    (:data:`UPSTREAM`). String literals that are not docstrings (messages, f-strings) are not looked at."""
    if not UPSTREAM.search(source):  # most modules: nothing to read closer
        return []
    lines: list[tuple[int, str]] = []
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            lines.append((tok.start[0], tok.string))
    for node in ast.walk(ast.parse(source)):  # module, class and function docstrings (and attribute ones)
        for field in ("body", "orelse", "finalbody"):
            statements = getattr(node, field, None)
            for statement in statements if isinstance(statements, list) else ():
                if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant) \
                        and isinstance(statement.value.value, str):
                    lines += [(statement.value.lineno + i, text)
                              for i, text in enumerate(statement.value.value.splitlines())]
    return sorted({(n, text) for n, text in lines if UPSTREAM.search(text)})


def test_no_comment_or_docstring_cites_upstream_source():
    """The project's rule: the upstream source (repository, tag, file, line) is cited in the test that models its
    behaviour; the package's comments and docstrings say the behaviour in plain words and cite no path outside this
    repository (user-facing messages may still name an upstream file: they are not looked at)."""
    found = [f"{path.relative_to(PACKAGE.parent)}:{n}: {text.strip()[:100]}"
             for path in modules() for n, text in upstream_citations(path.read_text())]
    assert found == [], "cite these in the test that models the behaviour, not in the code:\n" + "\n".join(found)


@pytest.mark.parametrize("source", [
    "# Marathon's default (M@1.11:src/main/scala/mesosphere/marathon/ZookeeperConf.scala)\nX = 1\n",
    '"""Read as apache/mesos@1.11.x:src/master/readonly_handler.cpp writes it."""\n',
    'def f():\n    """Records as ``records/generator.go`` (mesosphere/mesos-dns@e888ef4)."""\n',
    'class A:\n    """The labels.\n\n    kubernetes-sigs/jobset v0.12.0 ``api/jobset/v1alpha2/jobset_types.go``."""\n',
    "x = 1  # its state/UnreachableStrategy.scala\n",
    "#: (``.../api/v2/validation/NetworkValidation.scala``)\nY = 2\n",
    "# ``v1.4.3:169`` the same\n", "# from mesosphere/marathon#7206\n", "# releases/1.8 relaunches it\n",
    "# Mesos@1.11.x the same\n", "# the code of src/main/scala/mesosphere\n", "# as stout ``posix/os.hpp`` does\n",
])
def test_the_upstream_citation_check_finds_one(source):
    assert upstream_citations(source), source


def test_the_upstream_citation_check_leaves_messages_and_plain_words_alone():
    source = ('def f(c):\n    """Marathon 1.11\'s ``--zk_session_timeout`` default, 10 s (1.6.322-2bf46b341)."""\n'
              '    raise ValueError(f"{c} refuses (its state/UnreachableStrategy.scala)")  # as Mesos does\n'
              '# self.go is set by the bootstrap; see docs/restarts.md and tests/local/test_local_stock.py\n')
    assert upstream_citations(source) == []


#: What opens an HTTP connection (or makes what does): only :mod:`marathon_tf.marathon.transport` may, where
#: every request gets its deadline and size cap; the local cluster (a server, the Marathon imitation) is not held.
HTTP_OPENERS = {f"requests.{f}" for f in ("Session", "session", "get", "post", "put", "patch", "delete", "head",
                                          "options", "request", "sessions.Session", "api.request")} | {
    "urllib.request.urlopen", "urllib.request.build_opener", "urllib.request.OpenerDirector",
    "http.client.HTTPConnection", "http.client.HTTPSConnection", "urllib3.PoolManager", "urllib3.request",
    "urllib3.connection_from_url", "urllib3.disable_warnings"}
HTTP_ALLOWED = ("marathon_tf.marathon.transport", "marathon_tf.local")


def http_openers(source: str) -> list[tuple[int, str]]:
    """``(line, name)`` for every call of, or class made on, one of :data:`HTTP_OPENERS` in ``source``,
    through whatever name it was imported as."""
    tree = ast.parse(source)
    names: dict[str, str] = {}  # local name -> dotted name
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                names[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.update({a.asname or a.name: f"{node.module}.{a.name}" for a in node.names})

    def dotted(expr: ast.expr) -> str | None:
        if isinstance(expr, ast.Name):
            return names.get(expr.id)
        if isinstance(expr, ast.Attribute):
            base = dotted(expr.value)
            return f"{base}.{expr.attr}" if base else None
        return None

    found = []
    for node in ast.walk(tree):
        used = [node.func] if isinstance(node, ast.Call) else node.bases if isinstance(node, ast.ClassDef) else []
        found += [(node.lineno, name) for name in map(dotted, used) if name in HTTP_OPENERS]
    return found


def test_every_http_session_comes_from_transport():
    """Issue 39 item 1b: one module makes HTTP sessions, so no request goes out without a deadline and a cap."""
    found = [f"{module_name(path)}:{line} {name}" for path in modules()
             if not module_name(path).startswith(HTTP_ALLOWED) for line, name in http_openers(path.read_text())]
    assert found == [], "HTTP made outside marathon_tf.marathon.transport:\n" + "\n".join(found)


def test_the_http_check_finds_a_session_made_elsewhere():
    assert http_openers("import requests\nrequests.get('u')\ns = requests.Session()\n") == [
        (2, "requests.get"), (3, "requests.Session")]
    assert http_openers("from requests import Session as S\nclass A(S):\n    pass\n") == [(2, "requests.Session")]
    assert http_openers("import urllib.request\nurllib.request.urlopen('u')\n") == [(2, "urllib.request.urlopen")]
    assert http_openers("from http import client\nclient.HTTPConnection('h')\n") == [(2, "http.client.HTTPConnection")]
    assert http_openers("import requests\nrequests.RequestException()\nrequests.Session.request\n") == []


#: Fields only Marathon's answers have (apps, tasks, failures, events): read in ``marathon/`` (typed values,
#: ``marathon/model.py``), the local imitation and the Mesos model only.
MARATHON_ONLY = ("tasks", "host", "startedAt", "stagedAt", "lastTaskFailure", "versionInfo", "lastConfigChangeAt",
                 "healthCheckResults", "taskId", "appId", "deployments", "instances", "ipAddresses", "taskStatus",
                 "eventType")
#: What reads one of those names outside them, and why (at most ten): (modules, names) -> why.
MARATHON_READS_ALLOWED: dict[tuple[tuple[str, ...], tuple[str, ...]], str] = {
    (("user.status", "user.output", "user.observe", "user.results", "user.release", "user.history", "user.announce",
      "user.cli.change"), ("tasks", "host", "appId", "taskId")):
        "marathon-tf's own JSON (`status -o json`, `scale -o json`: docs/cli.md): its rows under `tasks` name the "
        "task's `host`, `appId` and `taskId` as Marathon does, on purpose",
    (("contract.joblock",), ("host",)): "the job lock file's own record (the machine that holds it)",
    (("contract.errors",), ("deployments",)): "a 409's body (`App is locked by one or more deployments`), read "
        "where the error that carries it is defined, below marathon/",
}


def _allowed(module: str, key: str) -> bool:
    short = module.removeprefix("marathon_tf.")
    return any(short in modules and key in keys for modules, keys in MARATHON_READS_ALLOWED)


def marathon_reads(source: str) -> list[tuple[int, str]]:
    """``(line, field)`` of every ``x["field"]`` and ``x.get("field", ...)`` of a Marathon-only field."""
    found = []
    for node in ast.walk(ast.parse(source)):
        key = None
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
            key = node.slice.value
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
              and node.args and isinstance(node.args[0], ast.Constant)):
            key = node.args[0].value
        if key in MARATHON_ONLY:
            found.append((node.lineno, str(key)))
    return sorted(found)


def test_marathons_json_is_read_in_marathon_only():
    outside = []
    for path in modules():
        name = module_name(path)
        if side_of(name) in ("marathon", "local", "mesos"):
            continue
        for line, key in marathon_reads(path.read_text()):
            if not _allowed(name, key):
                outside.append(f"{path.relative_to(PACKAGE.parent)}:{line} reads {key!r}")
    assert outside == [], "\n".join(outside)
    assert len(MARATHON_READS_ALLOWED) <= 10


def test_the_scan_finds_a_read_of_marathons_json():
    assert marathon_reads('app.get("lastTaskFailure") or {}\nt["startedAt"]\nx.get("labels")') == [
        (1, "lastTaskFailure"), (2, "startedAt")]
