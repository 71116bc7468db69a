#!/usr/bin/python3
"""Checks that psdb's source tree keeps the shape DESIGN.md draws.

  tools/check_tree.py BUILD_DIR

1. The folders' include graph is the target graph. BUILD_DIR/psdb_modules.json
   (written by CMake, cmake/psdb_helpers.cmake) names every module: its
   folder, the public headers under include/psdb/ it implements, the headers
   of its folder other modules may include, and the modules it links. Every
   quoted include in a module's folder (and in include/psdb/) must resolve to
   the module itself or to one it links, directly or not; a header of
   another module's folder must be one that module lists; a public header
   includes only public headers (and third-party ones), so an installed
   include/ is complete.
   Each module's README.md names every header it lists (DESIGN.md: "a
   short README.md naming its public headers").
2. No C++ file outside tests/ is longer than 800 lines (STYLE.md rule 7,
   split by concern first).

Prints one line per violation and exits 1 if there is any. Tests, tools,
examples and python are not modules: they may include what they link.
"""

import json
import os
import re
import sys

MAX_LINES = 800
CXX = (".h", ".cc", ".cu")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def load_modules(build_dir):
    with open(os.path.join(build_dir, "psdb_modules.json")) as f:
        return json.load(f)


def closure(modules, name):
    seen, todo = set(), [name]
    while todo:
        m = todo.pop()
        for d in modules[m]["deps"]:
            if d not in seen:
                seen.add(d)
                todo.append(d)
    return seen


def owner_of_folder_path(modules, path):
    """The module whose folder holds `path` (longest folder wins)."""
    best = None
    for name, m in modules.items():
        folder = m["folder"].rstrip("/") + "/"
        if path.startswith(folder) and (
                best is None or len(folder) > len(modules[best]["folder"]) + 1):
            best = name
    return best


def check_modules(root, modules):
    problems = []
    public_owner = {}
    for name, m in modules.items():
        for h in m["public_headers"]:
            public_owner["psdb/" + h] = name
    for path in sorted(public_owner):
        if not os.path.exists(os.path.join(root, "include", path)):
            problems.append(f"include/{path}: listed as {public_owner[path]}'s "
                            "public header but missing")
    for h in sorted(os.listdir(os.path.join(root, "include", "psdb"))):
        if "psdb/" + h not in public_owner and not h.endswith(".in"):
            problems.append(f"include/psdb/{h}: no module lists it in "
                            "PUBLIC_HEADERS")

    def resolve(includer_module, inc):
        """Module owning include `inc`, None for a third-party header."""
        if inc.startswith("psdb/"):
            return public_owner.get(inc, "?")
        owner = owner_of_folder_path(modules, inc)
        if owner is not None:
            return owner
        top = inc.split("/", 1)[0]
        if os.path.isdir(os.path.join(root, top)) and top not in ("include",):
            return "?"  # a psdb folder that is no module (tests/, tools/)
        return None

    def check_file(rel, module):
        with open(os.path.join(root, rel), errors="replace") as f:
            text = f.read()
        allowed = {module} | closure(modules, module)
        for inc in INCLUDE.findall(text):
            owner = resolve(module, inc)
            if owner is None:
                continue
            if owner == "?":
                problems.append(f"{rel}: includes \"{inc}\", which is no "
                                "module's")
                continue
            if rel.startswith("include/") and not inc.startswith("psdb/"):
                problems.append(f"{rel}: a public header includes internal "
                                f"\"{inc}\"")
                continue
            if owner not in allowed:
                problems.append(f"{rel}: {module} includes \"{inc}\" of "
                                f"{owner}, which it does not link")
                continue
            if owner != module and not inc.startswith("psdb/"):
                header = inc[len(modules[owner]["folder"]) + 1:]
                if header not in modules[owner]["headers"]:
                    problems.append(
                        f"{rel}: \"{inc}\" is internal to {owner} (not in its "
                        "HEADERS)")

    for name, m in modules.items():
        folder = m["folder"]
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, folder)):
            rel_dir = os.path.relpath(dirpath, root)
            # A nested module's folder is checked as that module.
            dirnames[:] = [d for d in dirnames
                           if owner_of_folder_path(
                               modules, os.path.join(rel_dir, d) + "/x") == name]
            for fn in filenames:
                if fn.endswith(CXX):
                    check_file(os.path.join(rel_dir, fn), name)
    for name, m in modules.items():
        readme = os.path.join(root, m["folder"], "README.md")
        if not os.path.exists(readme):
            problems.append(f"{m['folder']}/README.md: missing ({name})")
            continue
        with open(readme) as f:
            text = f.read()
        for h in sorted(set(m["public_headers"]) | set(m["headers"])):
            if f"`{h}`" not in text:
                problems.append(f"{m['folder']}/README.md: does not name "
                                f"`{h}`")
    for h in sorted(os.listdir(os.path.join(root, "include", "psdb"))):
        if "psdb/" + h in public_owner:
            check_file(os.path.join("include", "psdb", h),
                       public_owner["psdb/" + h])
    return problems


def check_sizes(root):
    problems = []
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = os.path.relpath(dirpath, root)
        if rel_dir == ".":
            dirnames[:] = [d for d in dirnames if d != "tests"
                           and not d.startswith((".", "build"))]
        for fn in filenames:
            if fn.endswith(CXX):
                rel = os.path.normpath(os.path.join(rel_dir, fn))
                with open(os.path.join(root, rel), errors="replace") as f:
                    n = sum(1 for _ in f)
                if n > MAX_LINES:
                    problems.append(f"{rel}: {n} lines (at most {MAX_LINES} "
                                    "outside tests/; split it by concern)")
    return problems


def main(argv):
    if len(argv) != 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    problems = check_modules(root, load_modules(argv[1])) + check_sizes(root)
    for p in problems:
        print(p)
    if problems:
        print(f"check_tree: {len(problems)} problem(s)")
        return 1
    print("check_tree: the module graph and file sizes are as DESIGN.md says")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
