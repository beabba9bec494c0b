"""Writes the openAPIV3Schema of each served version of the given CustomResourceDefinitions as
<group>/<kind>_<version>.json beside this file (sorted keys, so a re-extraction diffs cleanly).

    git -C <upstream clone> show <tag>:<path to CRD YAML> | python3 deploy/k8s/schemas/extract.py

See README.md here for the upstream projects, tags and paths.
"""

import json
import sys
from pathlib import Path

import yaml


def main() -> int:
    here = Path(__file__).resolve().parent
    for crd in yaml.safe_load_all(sys.stdin):
        if not crd or crd.get("kind") != "CustomResourceDefinition":
            continue
        group, kind = crd["spec"]["group"], crd["spec"]["names"]["kind"]
        for version in crd["spec"]["versions"]:
            if not version.get("served", True):
                continue
            target = here / group / f"{kind}_{version['name']}.json"
            target.parent.mkdir(exist_ok=True)
            schema = version["schema"]["openAPIV3Schema"]
            target.write_text(json.dumps(schema, indent=1, sort_keys=True) + "\n")
            print(f"wrote {target.relative_to(here)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
