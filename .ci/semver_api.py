#!/usr/bin/env python3
"""The public API of a crate from its rustdoc JSON, and the breaks between two.

    semver_api.py list CRATE.json
    semver_api.py diff BASELINE.json CURRENT.json

`list` prints one line per public item: its path from the crate root, its
kind and, for functions, constants, statics and type aliases, its signature
(ids dropped, paths cut to their last segment, so that spelling a path
differently is no change). Methods of public types appear as
`Type::method`, trait impls (auto traits included) as `Type: impl Trait`.

`diff` prints what a user of the baseline loses: items that are gone and
signatures that changed (`-` the baseline's line, `+` the current one), and
exits 1 if there is any; items that are new are listed as additions (fine in
a minor release) and do not fail. It does not judge everything
cargo-semver-checks does (e.g. a struct that gains a private field, a trait
that gains a required method), only whether every public path and
signature of the baseline is still there.
"""

import json
import sys


def norm(v):
    """A JSON value with ids dropped and paths cut to their last segment."""
    if isinstance(v, dict):
        out = {}
        for k, x in v.items():
            if k == "id":
                continue
            if k == "path" and isinstance(x, str):
                x = x.rsplit("::", 1)[-1]
            out[k] = norm(x)
        return out
    if isinstance(v, list):
        return [norm(x) for x in v]
    return v


def api(doc):
    index = doc["index"]
    lines = {}

    def add(path, kind, sig=None):
        lines[path + " " + kind] = json.dumps(norm(sig), sort_keys=True) if sig is not None else ""

    def item(iid):
        return index.get(str(iid)) if iid is not None else None

    def type_members(path, it, kind):
        for impl_id in it["inner"][kind].get("impls", []):
            impl = item(impl_id)
            if impl is None:
                continue
            inner = impl["inner"]["impl"]
            if inner.get("blanket_impl"):
                continue  # `impl<T> From<T> for T` and the like come with any type
            if inner.get("trait"):
                if inner.get("is_negative"):
                    continue
                add(path, "impl " + inner["trait"]["path"].rsplit("::", 1)[-1],
                    {"generics": inner.get("generics"), "trait": inner["trait"]})
                continue
            for m in inner.get("items", []):
                mi = item(m)
                if mi is None or mi["visibility"] != "public":
                    continue
                k = next(iter(mi["inner"]))
                add(path + "::" + mi["name"], k, mi["inner"][k])

    def walk(mod_id, prefix, seen):
        if mod_id in seen:
            return
        seen = seen | {mod_id}
        for iid in item(mod_id)["inner"]["module"]["items"]:
            it = item(iid)
            if it is None or it["visibility"] != "public":
                continue
            kind = next(iter(it["inner"]))
            if kind == "use":
                use = it["inner"]["use"]
                target = item(use["id"])
                if use["is_glob"]:
                    if target is not None and "module" in target["inner"]:
                        walk(use["id"], prefix, seen)
                    else:
                        add(prefix + "::*", "use", {"source": use["source"]})
                    continue
                path = prefix + "::" + use["name"]
                if target is None:
                    # A re-export from another crate: its source is the API.
                    add(path, "use", {"source": use["source"]})
                    continue
                it, iid = dict(target, name=use["name"]), use["id"]
                kind = next(iter(it["inner"]))
            path = prefix + "::" + it["name"]
            if kind == "module":
                add(path, "module")
                walk(iid, path, seen)
            elif kind in ("struct", "enum", "union", "trait"):
                add(path, kind, {"generics": it["inner"][kind].get("generics")})
                if kind == "enum":
                    for v in it["inner"]["enum"].get("variants", []):
                        add(path + "::" + item(v)["name"], "variant", item(v)["inner"])
                if kind == "trait":
                    for m in it["inner"]["trait"].get("items", []):
                        mi = item(m)
                        add(path + "::" + mi["name"], next(iter(mi["inner"])), mi["inner"])
                else:
                    type_members(path, it, kind)
            elif kind == "macro":
                add(path, kind)
            else:
                add(path, kind, it["inner"][kind])

    walk(doc["root"], item(doc["root"])["name"], frozenset())
    return lines


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "list":
        for k, v in sorted(api(json.load(open(sys.argv[2]))).items()):
            print(k, v)
        return 0
    if len(sys.argv) != 4 or sys.argv[1] != "diff":
        print(__doc__, file=sys.stderr)
        return 2
    base = api(json.load(open(sys.argv[2])))
    cur = api(json.load(open(sys.argv[3])))
    broken = 0
    for k in sorted(base):
        if k not in cur:
            print("removed:", k)
            broken += 1
        elif base[k] != cur[k]:
            print("changed:", k)
            print("  -", base[k])
            print("  +", cur[k])
            broken += 1
    added = sorted(set(cur) - set(base))
    for k in added:
        print("added:", k)
    print(f"public API: {len(base)} baseline items, {len(cur)} current, "
          f"{len(added)} added, {broken} removed or changed")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
