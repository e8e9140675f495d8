"""The benchmarks name only what the package has.

The benchmarks are not run by the suite (they are long, and their figures are ratios for a person to read), so
a name they import from ``marathon_tf`` inside a function could go away unnoticed: ``jobs.deploy`` did (issue
39 removed it), and every lifecycle, elastic, failover and admission benchmark failed at its first line for two
stops. This reads their source and checks every ``from marathon_tf… import`` and every attribute read on a module
imported so; nothing is run."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

BENCHMARKS = sorted((Path(__file__).resolve().parent.parent / "benchmarks").glob("*.py"))


def _uses(tree: ast.AST) -> list[tuple[int, str]]:
    """``(line, dotted name)`` for each name imported from a ``marathon_tf`` module and each attribute read on a
    name imported so (``from marathon_tf.user import jobs`` … ``jobs.scale``: ``marathon_tf.user.jobs.scale``)."""
    found: list[tuple[int, str]] = []
    for scope in ast.walk(tree):
        if not isinstance(scope, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        names: dict[str, str] = {}  # local name -> its dotted path, in this scope
        for node in ast.walk(scope):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("marathon_tf"):
                for alias in node.names:
                    found.append((node.lineno, f"{node.module}.{alias.name}"))
                    names[alias.asname or alias.name] = f"{node.module}.{alias.name}"
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.startswith("marathon_tf"):
                        found.append((node.lineno, alias.name))
                        if alias.asname:
                            names[alias.asname] = alias.name
        for node in ast.walk(scope):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in names \
                    and isinstance(node.ctx, ast.Load):
                found.append((node.lineno, f"{names[node.value.id]}.{node.attr}"))
    return found


def _exists(dotted: str) -> bool:
    """A module, or an attribute of what its parent names (a module's function, a class's member)."""
    try:
        importlib.import_module(dotted)
        return True
    except ImportError:
        pass
    parent, _, name = dotted.rpartition(".")
    if not parent or not _exists(parent):
        return False
    try:
        owner = importlib.import_module(parent)
    except ImportError:
        grand, _, attr = parent.rpartition(".")
        owner = getattr(importlib.import_module(grand), attr) if grand else None
    return owner is not None and hasattr(owner, name)


@pytest.mark.parametrize("path", BENCHMARKS, ids=[p.name for p in BENCHMARKS])
def test_every_name_a_benchmark_takes_from_the_package_exists(path):
    missing = [f"{path.name}:{line}: {dotted}" for line, dotted in _uses(ast.parse(path.read_text(), str(path)))
               if not _exists(dotted)]
    assert not missing, "no such name in the package:\n" + "\n".join(missing)


def test_the_check_finds_a_name_that_is_gone():
    tree = ast.parse("def bench():\n    from marathon_tf.user import jobs\n    jobs.deploy(None, None)\n"
                     "    from marathon_tf.user.pipeline import deploy\n"
                     "    from marathon_tf.contract.plan import RoundKind\n"
                     "    RoundKind.RESTART, RoundKind.NOPE\n")
    uses = dict((name, line) for line, name in _uses(tree))
    assert uses["marathon_tf.user.jobs.deploy"] == 3 and "marathon_tf.user.pipeline.deploy" in uses
    assert not _exists("marathon_tf.user.jobs.deploy") and _exists("marathon_tf.user.pipeline.deploy")
    assert _exists("marathon_tf.contract.plan.RoundKind.RESTART")
    assert not _exists("marathon_tf.contract.plan.RoundKind.NOPE")
