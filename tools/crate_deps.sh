#!/usr/bin/env bash
# For each workspace crate: its normal dependencies inside the workspace (cargo metadata).
cargo metadata --format-version 1 --no-deps --offline 2>/dev/null | python3 -c '
import json,sys
m=json.load(sys.stdin); names={p["name"] for p in m["packages"]}
for p in sorted(m["packages"], key=lambda p:p["name"]):
    deps=sorted(d["name"] for d in p["dependencies"] if d["name"] in names and d["kind"] is None)
    print(p["name"], "->", ", ".join(deps))'
