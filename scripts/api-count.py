#!/usr/bin/env python3
"""Counts the public API of the `stowage` crate as a user sees it, from
rustdoc's JSON output (issue 23, item 4: "under 200 public free functions
and methods outside `Tensor`, `UntypedStorage` and `Layout`").

usage: scripts/api-count.py [--json] [--no-build] [--no-foreign]
                            [--features F,G | --no-default-features]
       (from anywhere in the repository; needs `cargo +nightly`)

It runs

    cargo +nightly rustdoc -p stowage --lib -- -Z unstable-options --output-format json

(the crate's default features unless told otherwise; the summary names the
features) and reads `<target dir>/doc/stowage.json`. Set CARGO_TARGET_DIR to
keep the nightly build away from the stable one (CARGO_TARGET_DIR=/tmp/api-target),
and give each checkout its own: two worktrees sharing one target dir write
the same `doc/stowage.json`, and cargo, finding one of them fresh, does not
rewrite it, so the script would read the other's.

What is counted, all from the crate root outwards:

* An item is public when it can be named: the walk starts at the crate root
  and follows public modules and `pub use` re-exports (globs too, and
  re-exports of items that live in private modules). An item reached by two
  or more paths counts once; those items are listed ("more than one path").
  Items that rustdoc keeps but that no path names (types only seen in a
  signature, such as a sealed supertrait) are reported apart, not counted.
* types: structs, enums, unions, traits and type aliases.
* free functions: `fn` items in modules.
* methods: the `pub fn`s of inherent `impl` blocks of the types counted, plus
  the methods a public trait of the crate declares (counted once, on the
  trait, never again on each implementation). Trait implementations (`Clone`,
  `Debug`, `From`, ... or the crate's own traits) add no methods; their
  number is reported on its own line, by the trait's crate. Blanket and auto
  trait implementations are not counted at all.
* fields: the public fields of the structs counted (named and tuple); enum
  variants are counted on their own line.
* consts: `const` and `static` items in modules, and associated consts of
  inherent impls and traits.
* Foreign crates re-exported whole (`pub use half;`, `checkpoint::pickle` =
  `stowage_pickle`, `ndarray` with its feature) are not part of stowage's
  count. Each is counted with the same walk over its own rustdoc JSON and
  listed apart (`--no-foreign` skips those builds).

The target number is free functions + methods, leaving out the methods of
`Tensor`, `UntypedStorage` and `layout::Layout`.
"""
import argparse
import json
import os
import subprocess
import sys
from collections import Counter, defaultdict

# rustdoc JSON format versions this script was written against (format 57 is
# nightly 2026-05). Older and newer ones are read the same way, with a warning:
# the fields used here (index, paths, external_crates, module items, `use`,
# impls, struct/enum kinds) have been stable since format ~35.
KNOWN_FORMATS = {57}
# The three types the target leaves out, by their shortest path below the root.
EXCLUDED = {"Tensor", "UntypedStorage", "layout::Layout"}
STD_CRATES = {"std", "core", "alloc"}
TYPE_KINDS = {"struct", "enum", "union", "trait", "type_alias", "trait_alias"}
VALUE_KINDS = {"constant", "static"}


def cargo(*args, capture=True):
    cmd = ["cargo", *args]
    if capture:
        return subprocess.check_output(cmd, text=True)
    subprocess.check_call(cmd)
    return None


def kind_of(item):
    """The item's kind. Formats before ~30 name it in `kind` (and call a
    re-export `import`); later ones keep it as the one key of `inner`."""
    if "kind" in item:
        k = item["kind"]
    else:
        k = next(iter(item["inner"]))
    return "use" if k == "import" else k


def inner_of(item):
    if "kind" in item:
        return item["inner"]
    return next(iter(item["inner"].values()))


def flag(obj, name):
    """A boolean field, `is_x` in newer formats and `x` in older ones."""
    return bool(obj.get("is_" + name, obj.get(name)))


def is_public(item):
    return item.get("visibility") == "public"


class Doc:
    """One crate's rustdoc JSON."""

    def __init__(self, path):
        with open(path) as f:
            self.raw = json.load(f)
        self.format = self.raw.get("format_version")
        self.index = {str(k): v for k, v in self.raw["index"].items()}
        self.paths = {str(k): v for k, v in self.raw["paths"].items()}
        self.crates = {str(k): v["name"] for k, v in self.raw["external_crates"].items()}
        self.root = str(self.raw["root"])
        self.local_crate = self.index[self.root].get("crate_id", 0)

    def get(self, item_id):
        return None if item_id is None else self.index.get(str(item_id))

    def crate_name_of(self, item_id):
        """The crate a (possibly foreign) id belongs to, by name."""
        item = self.get(item_id)
        crate = item.get("crate_id") if item else self.paths.get(str(item_id), {}).get("crate_id")
        if crate is None:
            return "?"
        if crate == self.local_crate:
            return self.index[self.root]["name"]
        return self.crates.get(str(crate), "?")


def walk(doc):
    """Every item a public path names: {id: [path, ...]}, and the foreign
    re-exports met on the way: [(path, crate, foreign path)]."""
    found = defaultdict(list)
    foreign = []

    def add(item_id, path, stack):
        item = doc.get(item_id)
        found[str(item_id)].append(path)
        if kind_of(item) == "module" and str(item_id) not in stack:
            visit_module(item, path, stack | {str(item_id)})

    def visit_module(module, path, stack):
        for child_id in inner_of(module)["items"]:
            child = doc.get(child_id)
            if child is None or not is_public(child):
                continue
            if kind_of(child) == "use":
                visit_use(child, path, stack)
            elif child.get("crate_id", doc.local_crate) != doc.local_crate:
                foreign.append((path + [child["name"]], doc.crate_name_of(child_id), None))
            else:
                add(child_id, path + [child["name"]], stack)

    def visit_use(use_item, path, stack):
        use = inner_of(use_item)
        target_id = use.get("id")
        target = doc.get(target_id)
        name = use["name"]
        if target_id is None:
            return  # a primitive or something rustdoc could not resolve
        if target is None or target.get("crate_id", doc.local_crate) != doc.local_crate:
            foreign_path = doc.paths.get(str(target_id), {}).get("path")
            foreign.append((path + ([] if flag(use, "glob") else [name]),
                            doc.crate_name_of(target_id), foreign_path))
            return
        if flag(use, "glob"):
            if kind_of(target) == "module" and str(target_id) not in stack:
                visit_module(target, path, stack | {str(target_id)})
            elif kind_of(target) == "enum":
                pass  # `pub use Enum::*`: the variants, counted with the enum
            return
        add(target_id, path + [name], stack)

    root = doc.index[doc.root]
    found[doc.root].append([root["name"]])
    visit_module(root, [root["name"]], {doc.root})
    return found, foreign


def count(doc):
    found, foreign = walk(doc)
    kinds = Counter()
    free_fns = defaultdict(list)  # module path -> [fn name]
    methods = {}  # type path -> [method name] (inherent, and declared by traits)
    trait_impls = Counter()  # crate of the trait -> impl blocks
    fields = 0
    variants = 0
    assoc_consts = 0
    multi = []
    listing = []  # (kind, path) of every item counted, methods as Type::name

    def best(paths):
        return min(paths, key=lambda p: (len(p), p))

    for item_id, paths in found.items():
        item = doc.get(item_id)
        k = kind_of(item)
        if k == "module" and item_id == doc.root:
            continue
        kinds[k] += 1
        distinct = sorted({"::".join(p) for p in paths})
        if len(distinct) > 1:
            multi.append(distinct)
        path = best(paths)
        inner = inner_of(item)
        listing.append((k, "::".join(path)))
        if k == "function":
            free_fns["::".join(path[:-1])].append(path[-1])
        if k in ("struct", "enum", "union"):
            own = methods.setdefault("::".join(path), [])
            for impl_id in inner.get("impls", []):
                impl = inner_of(doc.get(impl_id) or {"inner": {"impl": {}}})
                if not impl or flag(impl, "synthetic") or impl.get("blanket_impl") is not None:
                    continue
                trait = impl.get("trait")
                if trait is not None:
                    crate = doc.crate_name_of(trait.get("id"))
                    trait_impls["std" if crate in STD_CRATES else crate] += 1
                    continue
                for member_id in impl.get("items", []):
                    member = doc.get(member_id)
                    if member is None or not is_public(member):
                        continue
                    mk = kind_of(member)
                    if mk == "function":
                        own.append(member["name"])
                        listing.append(("method", "::".join(path + [member["name"]])))
                    elif mk in ("assoc_const", "constant"):
                        assoc_consts += 1
                        listing.append(("assoc_const", "::".join(path + [member["name"]])))
        if k == "struct":
            shape = inner.get("kind")
            if isinstance(shape, dict) and "plain" in shape:
                ids = shape["plain"].get("fields", [])
            elif isinstance(shape, dict) and "tuple" in shape:
                ids = [i for i in shape["tuple"] if i is not None]
            else:
                ids = inner.get("fields", []) or []
            public = [doc.get(i) for i in ids if doc.get(i) and is_public(doc.get(i))]
            fields += len(public)
            listing += [("field", "::".join(path) + "." + f["name"]) for f in public]
        if k == "union":
            fields += sum(1 for i in inner.get("fields", []) if doc.get(i) and is_public(doc.get(i)))
        if k == "enum":
            variants += len(inner.get("variants", []))
        if k == "trait":
            own = methods.setdefault("::".join(path), [])
            for member_id in inner.get("items", []):
                member = doc.get(member_id)
                if member is None:
                    continue
                mk = kind_of(member)
                if mk == "function":
                    own.append(member["name"])
                    listing.append(("trait_method", "::".join(path + [member["name"]])))
                elif mk == "assoc_const":
                    assoc_consts += 1
                    listing.append(("assoc_const", "::".join(path + [member["name"]])))

    # Items rustdoc keeps (types in signatures) that no public path names.
    unnamed = []
    for item_id, item in doc.index.items():
        if item.get("crate_id", doc.local_crate) != doc.local_crate or item_id in found:
            continue
        if kind_of(item) in TYPE_KINDS and is_public(item):
            where = doc.paths.get(item_id, {}).get("path") or [item["name"]]
            unnamed.append("::".join(where))

    types = sum(kinds[k] for k in TYPE_KINDS)
    n_methods = sum(len(v) for v in methods.values())
    n_free = sum(len(v) for v in free_fns.values())
    root_name = doc.index[doc.root]["name"]
    excluded = {p: len(v) for p, v in methods.items()
                if p.split("::", 1)[-1] in EXCLUDED and p.startswith(root_name + "::")}
    target = n_free + n_methods - sum(excluded.values())
    consts = sum(kinds[k] for k in VALUE_KINDS) + assoc_consts
    return {
        "crate": doc.index[doc.root]["name"],
        "format_version": doc.format,
        "modules": kinds["module"],
        "types": types,
        "types_by_kind": {k: kinds[k] for k in sorted(TYPE_KINDS) if kinds[k]},
        "free_functions": n_free,
        "methods": n_methods,
        "fields": fields,
        "variants": variants,
        "consts": consts,
        "macros": kinds["macro"] + kinds["proc_macro"],
        "items": kinds["module"] + types + n_free + n_methods + fields + consts,
        "trait_impl_blocks": dict(sorted(trait_impls.items(), key=lambda kv: -kv[1])),
        "excluded_methods": excluded,
        "target": target,
        "multi_path_items": sorted(multi),
        "methods_by_type": {p: len(v) for p, v in
                            sorted(methods.items(), key=lambda kv: (-len(kv[1]), kv[0])) if v},
        "free_functions_by_module": {p: len(v) for p, v in
                                     sorted(free_fns.items(), key=lambda kv: (-len(kv[1]), kv[0]))},
        "unnamed_types": sorted(unnamed),
        "listing": sorted(listing, key=lambda kp: kp[1]),
        # `whole`: the crate itself (`pub use half;`), not one of its items.
        "foreign_reexports": [{"path": "::".join(p), "crate": c,
                               "whole": bool(fp) and len(fp) == 1,
                               "item": "::".join(fp or [])} for p, c, fp in foreign],
    }


def rustdoc_json(package, lib_name, features_args, metadata):
    cargo("+nightly", "rustdoc", "-q", "-p", package, "--lib", *features_args,
          "--", "-Z", "unstable-options", "--output-format", "json", capture=False)
    return os.path.join(metadata["target_directory"], "doc", lib_name + ".json")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", action="store_true", help="print the counts as JSON")
    ap.add_argument("--no-build", action="store_true",
                    help="read the JSON files an earlier run left in the target dir")
    ap.add_argument("--no-foreign", action="store_true",
                    help="do not build and count the re-exported crates")
    ap.add_argument("--list", action="store_true",
                    help="print every item counted (kind, path), one a line, and stop")
    ap.add_argument("--features", default=None, help="features of stowage, as cargo takes them")
    ap.add_argument("--no-default-features", action="store_true")
    args = ap.parse_args()

    metadata = json.loads(cargo("metadata", "--format-version", "1", "--no-deps"))
    all_meta = None
    stowage = next(p for p in metadata["packages"] if p["name"] == "stowage")
    features_args = []
    features = [] if args.no_default_features else list(stowage["features"].get("default", []))
    if args.no_default_features:
        features_args.append("--no-default-features")
    if args.features:
        features_args += ["--features", args.features]
        features += [f for f in args.features.replace(",", " ").split() if f not in features]
    path = os.path.join(metadata["target_directory"], "doc", "stowage.json")
    if not args.no_build:
        path = rustdoc_json("stowage", "stowage", features_args, metadata)
    doc = Doc(path)
    if doc.format not in KNOWN_FORMATS:
        print(f"api-count: rustdoc JSON format {doc.format}, written for {sorted(KNOWN_FORMATS)}; "
              "check the counts against the rustdoc-types crate of that version",
              file=sys.stderr)
    result = count(doc)
    result["features"] = features
    result["commit"] = subprocess.run(["git", "rev-parse", "--short", "HEAD"],
                                      capture_output=True, text=True).stdout.strip()
    result["toolchain"] = subprocess.run(["rustc", "+nightly", "-V"], capture_output=True,
                                         text=True).stdout.strip()

    if args.list:
        for k, p in result["listing"]:
            print(f"{k:13} {p}")
        return

    # The foreign crates re-exported whole, each counted from its own JSON.
    foreign = {}
    for entry in result["foreign_reexports"]:
        info = foreign.setdefault(entry["crate"], {"paths": [], "items": []})
        if entry["whole"]:
            info["paths"].append(entry["path"])
        else:
            info["items"].append(f"{entry['path']} = {entry['item'] or '?'}")
    if not args.no_foreign and any(info["paths"] for info in foreign.values()):
        if all_meta is None:
            all_meta = json.loads(cargo("metadata", "--format-version", "1"))
        resolved = {n["id"] for n in all_meta["resolve"]["nodes"]}
        for crate, info in foreign.items():
            if not info["paths"]:
                continue  # single items only: listed, the crate not counted
            pkg = next((p for p in all_meta["packages"] if p["id"] in resolved and any(
                t["name"].replace("-", "_") == crate and "lib" in t["kind"]
                for t in p["targets"])), None)
            if pkg is None:
                info["error"] = "no package found"
                continue
            spec = f"{pkg['name']}@{pkg['version']}"
            try:
                fpath = os.path.join(all_meta["target_directory"], "doc", crate + ".json")
                if not args.no_build:
                    fpath = rustdoc_json(spec, crate, [], all_meta)
                sub = count(Doc(fpath))
            except (subprocess.CalledProcessError, OSError, KeyError) as e:
                info["error"] = str(e)
                continue
            info["package"] = spec
            info["counts"] = {k: sub[k] for k in (
                "modules", "types", "free_functions", "methods", "fields", "consts", "items")}
            info["counts"]["multi_path_items"] = len(sub["multi_path_items"])
            info["counts"]["functions_and_methods"] = sub["free_functions"] + sub["methods"]
    result["foreign"] = foreign

    if args.json:
        json.dump(result, sys.stdout, indent=2)
        print()
        return
    r = result
    by_kind = ", ".join(f"{n} {k}" for k, n in r["types_by_kind"].items())
    print(f"stowage public API at {r['commit']} (features: {', '.join(r['features']) or 'none'}; "
          f"rustdoc JSON format {r['format_version']}, {r['toolchain']})")
    print(f"  modules          {r['modules']:5}")
    print(f"  types            {r['types']:5}  ({by_kind})")
    print(f"  free functions   {r['free_functions']:5}")
    print(f"  methods          {r['methods']:5}  (inherent, and declared by the crate's traits)")
    print(f"  public fields    {r['fields']:5}  (structs; enum variants: {r['variants']})")
    print(f"  consts/statics   {r['consts']:5}  (module-level and associated)")
    print(f"  items in all     {r['items']:5}  (the six lines above)")
    impls = ", ".join(f"{n} {c}" for c, n in r["trait_impl_blocks"].items())
    print(f"  trait impl blocks (no methods counted): {impls}")
    excl = ", ".join(f"{p.split('::')[-1]} {n}" for p, n in r["excluded_methods"].items())
    print(f"  TARGET free functions + methods outside Tensor, UntypedStorage, Layout: "
          f"{r['target']}  (goal: under 200; left out: {excl})")
    print(f"  items with more than one public path: {len(r['multi_path_items'])}")
    for paths in r["multi_path_items"]:
        print(f"    {'  =  '.join(paths)}")
    if r["unnamed_types"]:
        print(f"  public types no path names (seen only in signatures, not counted): "
              f"{', '.join(r['unnamed_types'])}")
    print("  most methods:")
    top = [(p, n) for p, n in r["methods_by_type"].items() if p not in r["excluded_methods"]]
    for p, n in top[:10]:
        print(f"    {n:4}  {p}")
    print("  most free functions:")
    for p, n in list(r["free_functions_by_module"].items())[:10]:
        print(f"    {n:4}  {p}")
    print("  re-exported crates (not in the counts above):")
    for crate, info in r["foreign"].items():
        where = ", ".join(info["paths"])
        if "counts" in info:
            c = info["counts"]
            print(f"    {where} = {info['package']}: {c['items']} items "
                  f"({c['modules']} modules, {c['types']} types, "
                  f"{c['functions_and_methods']} functions and methods, "
                  f"{c['fields']} fields, {c['consts']} consts; "
                  f"{c['multi_path_items']} with more than one path)")
        elif where:
            print(f"    {where} = {crate}" + (f" ({info['error']})" if "error" in info else ""))
        for item in info["items"]:
            print(f"    {item} (from {crate})")


if __name__ == "__main__":
    main()
