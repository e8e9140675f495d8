"""Marathon's own JSON Schemas as validators, per Marathon version, and the rules they do not express
(the ``unreachableStrategy`` validator of 1.4.0–1.4.5). For the golden renders per version
(tests/user/test_render_versions.py) and the fake 1.4.3 Marathon (tests/user/test_marathon_versions.py).

* 1.4.x: ``tests/data/marathon-schema/1.4`` (releases/1.4's ``AppDefinition.json``, ``Group.json``).
* 1.5 – 1.7: ``tests/data/marathon-schema/1.7`` (releases/1.7's; the files were removed in 1.8).
* 1.8 – 1.11: no JSON Schema exists; the 1.7 schema, plus the app fields that 1.11's RAML type ``App``
  (``/work/shared/marathon-api/raml/1.11/v2/types/app.raml``, copied here as :data:`RAML_1_11_ONLY`)
  adds to it — ``check``, ``resourceLimits``, ``role``, ``tty`` — accepted with any value (marathon-tf
  renders none of them). The schemas are Marathon's "approximate" description (deprecated in 1.6,
  never used by the server to validate), so a rule the server enforces in code is checked here too.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import jsonschema
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT4

from marathon_tf.marathon.versions import MarathonVersion, parse_version

SCHEMAS = Path(__file__).resolve().parent / "data" / "marathon-schema"  # Marathon's own, see its SOURCE.md
#: The properties of RAML 1.11's ``App`` (raml/1.11/v2/types/app.raml) that the 1.7 JSON Schema lacks.
RAML_1_11_ONLY = ("check", "resourceLimits", "role", "tty")
_APP_URI = ("https://raw.githubusercontent.com/mesosphere/marathon/master/docs/docs/rest-api/public/api/v2/"
            "schema/AppDefinition.json")


def schema_dir(version: str | MarathonVersion) -> str:
    v = parse_version(version)
    assert v is not None, version
    return "1.4" if (v.major, v.minor) == (1, 4) else "1.7"


def validator(version: str | MarathonVersion = "1.7") -> jsonschema.Draft4Validator:
    """A validator of a group for that Marathon version (see the module for which schema)."""
    v = parse_version(version)
    folder = SCHEMAS / schema_dir(v)
    app = json.loads((folder / "AppDefinition.json").read_text())
    group = json.loads((folder / "Group.json").read_text())
    if (v.major, v.minor) >= (1, 8):
        app = copy.deepcopy(app)
        for name in RAML_1_11_ONLY:
            app["properties"].setdefault(name, {})
    registry = Registry().with_resource(app.get("id") or _APP_URI,
                                        Resource.from_contents(app, default_specification=DRAFT4))
    return jsonschema.Draft4Validator(group, registry=registry)


def unreachable_errors(app: dict[str, Any], version: str | MarathonVersion) -> list[str]:
    """Marathon's ``UnreachableEnabled`` validator (``state/UnreachableStrategy.scala``): before 1.4.6
    ``inactiveAfter >= 1 s`` and ``< expungeAfter`` (v1.4.0 … v1.4.5), from 1.4.6 ``>= 0`` and ``<=``."""
    strategy = app.get("unreachableStrategy")
    if not isinstance(strategy, dict):
        return []
    v = parse_version(version)
    inactive = strategy.get("inactiveAfterSeconds", 0)
    expunge = strategy.get("expungeAfterSeconds", 0)
    if v < parse_version("1.4.6"):
        ok = inactive >= 1 and inactive < expunge
    else:
        ok = inactive >= 0 and inactive <= expunge
    return [] if ok else [f"{app.get('id')}: unreachableStrategy {inactive}/{expunge} is refused by Marathon {v} "
                          f"(state/UnreachableStrategy.scala)"]


def errors(group: dict[str, Any], version: str | MarathonVersion) -> list[str]:
    """Everything Marathon ``version`` would refuse in ``group`` that the schema and the rules above see."""
    found = [f"{'/'.join(map(str, e.path))}: {e.message[:200]}" for e in validator(version).iter_errors(group)]
    for app in group.get("apps") or []:
        found += unreachable_errors(app, version)
    return found
