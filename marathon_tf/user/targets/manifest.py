"""A manifest as text: YAML (what ``kubectl apply -f`` is usually given) or JSON, with what did not
translate named at the top of the YAML. Pure (PyYAML's ``safe_dump``: plain data only).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import yaml

__all__ = ["FORMATS", "to_text"]

FORMATS = ("yaml", "json")


class _Dumper(yaml.SafeDumper):
    """Block style, and lists indented under their key (as kubectl and the Kubernetes docs write them)."""

    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        super().increase_indent(flow, False)


def to_text(manifest: dict[str, Any], fmt: str, *, header: Sequence[str] = (),
            untranslatable: Sequence[str] = ()) -> str:
    """``manifest`` as ``fmt`` text ending in a newline. YAML starts with ``header`` and the
    ``untranslatable`` entries as comments (JSON has no comments: the manifest's annotation names them)."""
    if fmt == "json":
        return json.dumps(manifest, indent=2, ensure_ascii=False) + "\n"
    if fmt != "yaml":
        raise ValueError(f"unknown format {fmt!r} (one of {', '.join(FORMATS)})")
    lines = [f"# {line}" for line in header]
    if untranslatable:
        lines.append("# Not translated (each is also listed on stderr):")
        lines += [f"#   {_one_line(entry)}" for entry in untranslatable]
    body = yaml.dump(manifest, Dumper=_Dumper, sort_keys=False, default_flow_style=False, allow_unicode=True,
                     width=1 << 30)
    return "".join(line + "\n" for line in lines) + body


def _one_line(text: str) -> str:
    return " ".join(text.split())
