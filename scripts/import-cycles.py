#!/usr/bin/env python3
"""Import circles between the source files of a crate.

A file imports another when it names an item of that file's module through a path:
`use crate::a::b::{c, d}`, `crate::a::b::f()` in code, `super::x`, `self::x` (relative
to the file's module), and `child::x` (a path, in a `use` or in code, whose first
segment is a child module of the file's module: Rust 2018's relative paths). `mod
child;` declarations are not imports; a parent's `pub use child::X` is. Inside an
inline `mod tests { ... }`, `super::` names the file's module. Each path resolves to
the longest prefix that is a file of the crate. The strongly connected components of
that graph with more than one file are the circles; each is printed with the edges
that close it.

    python3 scripts/import-cycles.py crates/spindle-http/src [crates/spindle-grpc/src ...]
    python3 scripts/import-cycles.py --allow fiber,sched crates/spindle/src

`--allow A,B,...`: a circle whose files all lie under these top-level modules is
reported but not counted (the layer rule's one allowed circle).

`--layers "sys < fiber < sched < park,sync < net,time,task < runtime"`: the top-level
modules in layers, lowest first; a file that imports a file of a higher layer is reported
as UP (imports go down only). Modules the list does not name sit beside the layers and are
not checked; imports between the modules of `--allow` are the allowed circle's.

Exit status 1 when a counted circle or an upward import remains.
"""

import os
import re
import sys

USE_RE = re.compile(r"\buse\s+([A-Za-z_][A-Za-z0-9_]*(?:::[^;]*)?);", re.S)
# A path not preceded by `::` or an identifier character: `crate::x`, `super::x`, `child::x`.
PATH_RE = re.compile(r"(?<![\w:])([A-Za-z_][A-Za-z0-9_]*(?:::(?:super|[A-Za-z_][A-Za-z0-9_]*))+)")
INLINE_MOD_RE = re.compile(r"\bmod\s+([A-Za-z_][A-Za-z0-9_]*)\s*\{")
COMMENT_RE = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
STRING_RE = re.compile(r'"(?:\\.|[^"\\])*"')
# A char literal (`'{'` would unbalance an inline module's braces); lifetimes never match.
CHAR_RE = re.compile(r"'(?:\\.|[^'\\\n])'")


def module_files(src):
    """Map module path (tuple) -> file path, for every .rs file under src."""
    mods = {}
    for root, _dirs, files in os.walk(src):
        for name in files:
            if not name.endswith(".rs"):
                continue
            path = os.path.join(root, name)
            rel = os.path.relpath(path, src)[:-3].split(os.sep)
            if rel in (["lib"], ["main"]):
                mod = ()
            elif rel[-1] == "mod":
                mod = tuple(rel[:-1])
            else:
                mod = tuple(rel)
            if rel and rel[0] == "bin":
                continue
            mods[mod] = path
    return mods


def expand_use(tree):
    """Expand a use tree `a::b::{c, d::{e}}` into its paths."""
    # `a::b as c`: the alias is not a path segment.
    tree = re.sub(r"\s+as\s+[A-Za-z_][A-Za-z0-9_]*", "", tree)
    tree = re.sub(r"\s+", "", tree)
    depth = 0
    for i, ch in enumerate(tree):
        if ch == "{":
            prefix = tree[:i]
            inner = tree[i + 1 : tree.rindex("}")]
            parts, cur, depth = [], "", 0
            for c in inner:
                if c == "," and depth == 0:
                    parts.append(cur)
                    cur = ""
                    continue
                depth += c == "{"
                depth -= c == "}"
                cur += c
            parts.append(cur)
            out = []
            for p in parts:
                if not p:
                    continue
                if p == "self":
                    out.append(prefix.rstrip(":"))
                else:
                    out.extend(expand_use(prefix + p))
            return out
    return [tree.split(" as ")[0]]


def resolve(path, here, mods):
    """The module (tuple) a path names, relative to module `here`, or None."""
    segs = [s for s in path.split("::") if s]
    if not segs:
        return None
    if segs[0] == "crate":
        base, segs = [], segs[1:]
    elif segs[0] in ("self", "super"):
        base = list(here)
        while segs and segs[0] in ("self", "super"):
            if segs[0] == "super":
                if not base:
                    return None
                base.pop()
            segs = segs[1:]
    elif tuple(here) + (segs[0],) in mods:
        # A child module of `here`, named without `self::` (Rust 2018 paths).
        base = list(here)
    else:
        return None
    full = base + segs
    for n in range(len(full), -1, -1):
        if tuple(full[:n]) in mods:
            return tuple(full[:n])
    return None


def inline_mods(text):
    """The inline `mod name { ... }` blocks of a file: (start, end, name) spans."""
    spans = []
    for m in INLINE_MOD_RE.finditer(text):
        depth, i = 0, m.end() - 1
        while i < len(text):
            depth += text[i] == "{"
            depth -= text[i] == "}"
            if depth == 0:
                break
            i += 1
        spans.append((m.end(), i, m.group(1)))
    return spans


def inline_path(spans, pos):
    """The inline modules (outermost first) that enclose position `pos`."""
    return tuple(name for start, end, name in spans if start <= pos < end)


def graph(src):
    mods = module_files(src)
    edges = {m: {} for m in mods}
    for mod, path in mods.items():
        text = open(path, encoding="utf-8").read()
        text = COMMENT_RE.sub("", text)
        text = STRING_RE.sub('""', text)
        text = CHAR_RE.sub("' '", text)
        # `#[cfg(test)] mod tests { ... }` inside a file is the file's own: its `super::`
        # names the file's module, as `self::` does outside it.
        inline = inline_mods(text)
        paths, uses = [], []
        for m in USE_RE.finditer(text):
            here = mod + inline_path(inline, m.start())
            paths.extend((p, here) for p in expand_use(m.group(1)))
            uses.append((m.start(), m.end()))
        for m in PATH_RE.finditer(text):
            # A path inside a use tree (`use crate::a::{b::c}`) is the use's, expanded above.
            if any(start <= m.start() < end for start, end in uses):
                continue
            paths.append((m.group(1), mod + inline_path(inline, m.start())))
        for p, here in paths:
            target = resolve(p, here, mods)
            if target is None or target == mod:
                continue
            edges[mod].setdefault(target, p)
    return mods, edges


def sccs(nodes, edges):
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            out.append(comp)

    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


def name(mod):
    return "::".join(mod) or "lib"


def layer_ranks(spec):
    """`"a < b,c < d"` -> {a: 0, b: 1, c: 1, d: 2}."""
    ranks = {}
    for rank, layer in enumerate(spec.split("<")):
        for module in layer.split(","):
            if module.strip():
                ranks[module.strip()] = rank
    return ranks


def upward(edges, ranks, allow):
    """The imports from a file of a lower layer to one of a higher layer."""
    found = []
    for m, targets in edges.items():
        for t, p in targets.items():
            if not m or not t or m[0] not in ranks or t[0] not in ranks:
                continue
            # A test file (`source_tests.rs`) may drive its room through the runtime.
            if m[-1] == "tests" or m[-1].endswith("_tests"):
                continue
            if m[0] in allow and t[0] in allow:
                continue
            if ranks[m[0]] < ranks[t[0]]:
                found.append((m, t, p))
    return sorted(found)


def main(argv):
    allow, ranks = set(), {}
    while argv and argv[0] in ("--allow", "--layers"):
        if argv[0] == "--allow":
            allow = set(argv[1].split(","))
        else:
            ranks = layer_ranks(argv[1])
        argv = argv[2:]
    failed = False
    for src in argv:
        mods, edges = graph(src)
        circles = [c for c in sccs(mods, edges) if len(c) > 1]
        print(f"{src}: {len(mods)} files, {len(circles)} import circle(s)")
        for comp in sorted(circles, key=len, reverse=True):
            members = set(comp)
            allowed = allow and all(m and m[0] in allow for m in comp)
            tag = "allowed" if allowed else "CIRCLE"
            failed |= not allowed
            print(f"  {tag} ({len(comp)} files): " + ", ".join(sorted(name(m) for m in comp)))
            for m in sorted(comp):
                for t, p in sorted(edges[m].items()):
                    if t in members:
                        print(f"      {name(m)} -> {name(t)}   ({p})")
        if ranks:
            ups = upward(edges, ranks, allow)
            print(f"  {len(ups)} import(s) up a layer")
            for m, t, p in ups:
                failed = True
                print(f"  UP {name(m)} -> {name(t)}   ({p})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
