"""Traced code across the modules of a project.

Two halves:

- :func:`summarise` reads one module (its syntax tree and its own, module-local traced facts)
  and returns a small plain-data summary: what it imports, the functions and methods it
  defines, what each of them calls (resolved inside the module where possible, else as the
  dotted spelling of the callee), and which of them the module itself traces, with the entry
  point that reaches each. A summary depends on the module's text only, so it is cached by
  content.
- :class:`ProjectIndex` joins the summaries of every module of a project, resolves the calls
  that leave a module (absolute and relative imports, ``from pkg import mod``,
  ``import pkg.mod as m``, class instances ``obj = C(); obj.m()`` and ``C().g()``, methods
  inherited from a base class of another module, simple aliases) to the project's own
  functions, and follows traced code through them (at most ``MAX_MODULE_HOPS`` calls into
  other modules; not through calls that run once or only eagerly, nor into functions that ask
  whether they run eagerly, nor into TensorFlow's and Keras's own modules). :meth:`ProjectIndex.facts_for` gives a
  module the functions that traced code of the project (its own or another module's) reaches
  beyond what the module alone shows, each with the entry point that reaches it.

Calls are written in a summary as ``"L:<qualname>"`` (a function of the same module: ``f`` or
``C.m``) or ``"X:<chain>"`` (``losses.compute``, ``models.Net().call``: a dotted chain rooted
at an imported or module-level name; ``()`` marks an instance of the class before it).
"""

from __future__ import annotations

import ast
import os
from functools import lru_cache
from typing import Any

SUMMARY_FORMAT = 2
# Calls by which a function asks whether it runs eagerly (it is written to be traced, too).
_EAGER_CHECKS = frozenset({"executing_eagerly", "inside_function", "executing_eagerly_outside_functions"})
_MAX_DEPTH = 8
FRAMEWORK_PACKAGES = frozenset({"tensorflow", "keras", "tf_keras"})
# Traced code is followed through at most this many calls into other modules.
MAX_MODULE_HOPS = 2

Summary = dict[str, Any]
# qualname -> [entry qualname, entry display path, entry line]
Facts = dict[str, list]


def _chain(expr: ast.AST) -> str | None:
    """``a.b.c`` for a Name/Attribute chain, ``a.C().m`` through one call of a chain."""
    parts: list[str] = []
    while True:
        if isinstance(expr, ast.Attribute):
            parts.append(expr.attr)
            expr = expr.value
        elif isinstance(expr, ast.Call) and not parts[-1:] == ["()"] and (
            isinstance(expr.func, (ast.Name, ast.Attribute))
        ):
            if not parts:
                return None
            parts.append("()")
            expr = expr.func
        else:
            break
    if not isinstance(expr, ast.Name):
        return None
    parts.append(expr.id)
    out = ""
    for p in reversed(parts):
        if p == "()":
            out += "()"
        else:
            out += ("." if out else "") + p
    return out


def is_framework_module(path: str) -> bool:
    """Whether the file is a module of TensorFlow or Keras themselves (traced code is not
    followed into them, nor out of them: their summaries hold what resolution needs only)."""
    return module_name(path).split(".")[0] in FRAMEWORK_PACKAGES


def summarise(analysis, traced=None, follow: bool = True) -> Summary:
    """The summary of one module (see the module docstring). ``traced``: the module's own
    :class:`~tflint.analysis.traced.TracedFunctions`, or ``None`` when nothing is traced.
    ``follow=False`` (a framework module): definitions and imports only, no calls."""
    a = analysis
    tree = a.tree
    imports: dict[str, list] = {}
    for node in a.nodes(ast.Import, ast.ImportFrom):
        if isinstance(node, ast.Import):
            for al in node.names:
                if al.asname:
                    imports[al.asname] = ["mod", al.name, 0, ""]
                else:
                    root = al.name.split(".")[0]
                    imports[root] = ["mod", root, 0, ""]
        else:
            for al in node.names:
                if al.name != "*":
                    imports[al.asname or al.name] = ["from", node.module or "", node.level, al.name]

    owners: dict[ast.AST, str] = {}  # top-level def / method node -> qualname
    defs: dict[str, int] = {}
    classes: dict[str, dict] = {}
    aliases: dict[str, str] = {}
    instances: dict[str, str] = {}  # module-level `obj = C(...)`: obj -> chain of C
    class_nodes: dict[str, ast.ClassDef] = {}
    for stmt in tree.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            owners[stmt] = stmt.name
            defs[stmt.name] = stmt.lineno
        elif isinstance(stmt, ast.ClassDef):
            class_nodes[stmt.name] = stmt
            methods = []
            for sub in stmt.body:
                if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    q = f"{stmt.name}.{sub.name}"
                    owners[sub] = q
                    defs[q] = sub.lineno
                    methods.append(sub.name)
            classes[stmt.name] = {"bases": [c for c in map(_chain, stmt.bases) if c], "methods": methods}
        elif isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            name = stmt.targets[0].id
            value = stmt.value
            if isinstance(value, (ast.Name, ast.Attribute)):
                c = _chain(value)
                if c:
                    aliases[name] = c
            elif isinstance(value, ast.Call) and isinstance(value.func, (ast.Name, ast.Attribute)):
                c = _chain(value.func)
                if c:
                    instances[name] = c

    def method_of(cls_name: str, meth: str, depth: int = 0) -> str | None:
        """``X.m`` for the local class chain of ``cls_name`` that defines ``meth``; else an
        external ``chain().meth`` through an imported base; else ``None``."""
        info = classes.get(cls_name)
        if info is None or depth > _MAX_DEPTH:
            return None
        if meth in info["methods"]:
            return f"L:{cls_name}.{meth}"
        for b in info["bases"]:
            if b in classes:
                got = method_of(b, meth, depth + 1)
                if got:
                    return got
            elif b.split(".")[0] in imports:
                return f"X:{b}().{meth}"
        return None

    def resolve_chain(chain: str, local_instances: dict[str, str]) -> str | None:
        root, _, rest = chain.partition(".")
        root_name = root.split("(")[0]
        if "(" in root:  # C().m
            if not rest or "." in rest or "(" in rest:
                return None
            return instance_call(root_name, rest)
        if not rest:
            if root in defs:
                return f"L:{root}"
            if root in classes:
                return None  # a constructor: state built once, not followed
            if root in imports:
                return f"X:{root}"
            if root in aliases:
                target = aliases[root]
                return f"L:{target}" if target in defs else (f"X:{target}" if target.split(".")[0] in imports else None)
            return None
        if root in local_instances and "." not in rest and "(" not in rest:
            return instance_call(local_instances[root], rest)
        if root in classes and "." not in rest and "(" not in rest:
            return method_of(root, rest)
        if root in imports:
            return f"X:{chain}"
        if root in aliases:
            return resolve_chain(aliases[root] + "." + rest, local_instances)
        return None

    def instance_call(cls_chain: str, meth: str) -> str | None:
        if cls_chain in classes:
            return method_of(cls_chain, meth)
        if cls_chain.split(".")[0] in imports and "(" not in cls_chain:
            return f"X:{cls_chain}().{meth}"
        return None

    # Names bound to `C(...)` per owner (for `obj = C(); obj.m()`), from the module's assignments.
    owner_instances: dict[str, dict[str, str]] = {}

    def owner_of(node: ast.AST) -> tuple[str | None, ast.AST | None]:
        f = a.enclosing_function(node)
        while f is not None and f not in owners:
            f = a.enclosing_function(f)
        return (owners.get(f) if f is not None else None), f

    for node in a.nodes(ast.Assign) if follow else ():
        if len(node.targets) != 1 or not isinstance(node.targets[0], ast.Name):
            continue
        value = node.value
        if not (isinstance(value, ast.Call) and isinstance(value.func, (ast.Name, ast.Attribute))):
            continue
        q, _ = owner_of(node)
        if q is None:
            continue
        c = _chain(value.func)
        if c and (c in classes or c.split(".")[0] in imports):
            owner_instances.setdefault(q, {})[node.targets[0].id] = c

    calls: dict[str, list[str]] = {}
    aware: set[str] = set()  # functions that test whether they run eagerly: written for both
    if follow:
        guarded = _guard_test(a, traced if traced is not None else a.traced)
    for call in a.nodes(ast.Call) if follow else ():
        q, fnode = owner_of(call)
        if q is None:
            continue
        func = call.func
        fname = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        if fname in _EAGER_CHECKS:
            aware.add(q)
            continue
        ref = None
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in ("self", "cls"):
            cls_name = q.split(".")[0] if "." in q else None
            if cls_name is not None:
                ref = method_of(cls_name, func.attr)
        elif isinstance(func, (ast.Name, ast.Attribute)):
            c = _chain(func)
            if c:
                local_inst = owner_instances.get(q)
                inst = {**instances, **local_inst} if local_inst else instances
                ref = resolve_chain(c, inst)
        if ref is not None and ref != f"L:{q}":
            # a call that runs once (``if self._x is None:``) or only eagerly is not followed
            if guarded(call, fnode):
                continue
            got = calls.setdefault(q, [])
            if ref not in got:
                got.append(ref)

    traced_out: dict[str, list] = {}
    if follow and traced is not None and traced.reasons:
        roots = getattr(traced, "roots", {})
        for node, q in owners.items():
            if node in traced.reasons:
                root = roots.get(node, node)
                rq = owners.get(root) or getattr(root, "name", "<lambda>")
                traced_out[q] = [rq, getattr(root, "lineno", 1)]
    return {
        "format": SUMMARY_FORMAT,
        "imports": imports,
        "defs": defs,
        "classes": classes,
        "aliases": aliases,
        "calls": calls,
        "traced": traced_out,
        "aware": sorted(aware),
    }


_BLOCKS = ("body", "orelse", "finalbody")


def _guard_test(a, traced):
    """``guarded(node, func)``: whether ``node`` runs in ``func`` only once or only eagerly:
    inside an ``if``/``while`` whose test is a create-once or eager-only test (the tests of
    :meth:`TracedFunctions.guard_of`), or after an ``if <such test>: return`` in its block.
    Computed for the whole module at once (the guards are few, the calls many)."""
    guards: set[ast.AST] = set()
    after_exit: set[ast.AST] = set()
    once, eager = traced.is_once_guard, traced.is_eager_guard
    for node in a.nodes(ast.If, ast.IfExp, ast.While):
        test = node.test
        if once(test) or eager(test):
            guards.add(node)
        if (
            isinstance(node, ast.If)
            and node.body
            and isinstance(node.body[-1], (ast.Return, ast.Raise))
            and (once(test, negated=True) or eager(test, negated=True))
        ):
            parent = a.parent(node)
            for field in _BLOCKS:
                block = getattr(parent, field, None)
                if isinstance(block, list) and node in block:
                    after_exit.update(block[block.index(node) + 1:])
                    break
    if not guards and not after_exit:
        return lambda node, func: False
    parents = a.parents

    def guarded(node: ast.AST, func: ast.AST | None) -> bool:
        child = node
        p = parents.get(node)
        while p is not None and p is not func:
            if child in after_exit:
                return True
            if p in guards and child is not p.test:
                return True
            if p.__class__ in (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef):
                return False
            child, p = p, parents.get(p)
        return child in after_exit

    return guarded


def empty_summary() -> Summary:
    return {"format": SUMMARY_FORMAT, "imports": {}, "defs": {}, "classes": {}, "aliases": {}, "calls": {}, "traced": {},
            "aware": []}


def is_summary(s: object) -> bool:
    """Whether ``s`` has the shape of a summary (a cache entry is never trusted)."""
    if not isinstance(s, dict) or s.get("format") != SUMMARY_FORMAT:
        return False
    try:
        if not all(isinstance(s[k], dict) for k in ("imports", "defs", "classes", "aliases", "calls", "traced")):
            return False
        for v in s["imports"].values():
            kind, mod, level, name = v
            if not (isinstance(kind, str) and isinstance(mod, str) and isinstance(level, int) and isinstance(name, str)):
                return False
        for v in s["classes"].values():
            if not (isinstance(v["bases"], list) and isinstance(v["methods"], list)):
                return False
            if not all(isinstance(x, str) for x in (*v["bases"], *v["methods"])):
                return False
        for v in s["calls"].values():
            if not (isinstance(v, list) and all(isinstance(x, str) and x[:2] in ("L:", "X:") for x in v)):
                return False
        for v in s["traced"].values():
            root, line = v
            if not (isinstance(root, str) and isinstance(line, int)):
                return False
        if not all(isinstance(v, str) for v in s["aliases"].values()):
            return False
        if not (isinstance(s["aware"], list) and all(isinstance(v, str) for v in s["aware"])):
            return False
    except (KeyError, TypeError, ValueError):
        return False
    return True


def module_name(path: str) -> str:
    """The dotted module name of a file: its stem prefixed by the packages (directories with
    an ``__init__.py``) above it; ``pkg`` for ``pkg/__init__.py``."""
    d, base = os.path.split(os.path.abspath(path))
    stem = base[:-3] if base.endswith(".py") else base.rsplit(".", 1)[0]
    prefix = _package_prefix(d)
    if stem == "__init__":
        return prefix or stem
    return f"{prefix}.{stem}" if prefix else stem


@lru_cache(maxsize=4096)
def _package_prefix(d: str) -> str:
    if not os.path.isfile(os.path.join(d, "__init__.py")):
        return ""
    parent, name = os.path.split(d)
    if not name or parent == d:
        return name
    up = _package_prefix(parent)
    return f"{up}.{name}" if up else name


class _Module:
    __slots__ = ("path", "disp", "name", "is_package", "s", "aware", "framework")

    def __init__(self, path: str, disp: str, summary: Summary) -> None:
        self.path = os.path.abspath(path)
        self.disp = disp
        self.name = module_name(path)
        self.is_package = os.path.basename(path) == "__init__.py"
        self.s = summary
        self.aware = frozenset(summary["aware"])
        # TensorFlow's and Keras's own modules are the API tflint models, not user code:
        # traced code is not followed into them.
        self.framework = self.name.split(".")[0] in FRAMEWORK_PACKAGES


class ProjectIndex:
    """The summaries of a project's modules, joined (see the module docstring)."""

    def __init__(self, modules: list[tuple[str, str, Summary]]) -> None:
        """``modules``: (file path, display path, summary) for every module of the project."""
        self.modules: list[_Module] = []
        self.by_name: dict[str, _Module | None] = {}
        self.by_path: dict[str, _Module] = {}
        for path, disp, summary in modules:
            if not is_summary(summary):
                continue
            m = _Module(path, disp, summary)
            self.modules.append(m)
            self.by_path[m.path] = m
            # Two files with one module name (scripts of several directories): neither resolves
            # by name; each still resolves from its own directory.
            self.by_name[m.name] = None if m.name in self.by_name else m
        self.external: dict[str, Facts] = {}
        self._propagate()

    # -- resolution ------------------------------------------------------------------------
    def _module(self, name: str, near: _Module) -> _Module | None:
        got = self.by_name.get(name)
        if got is not None:
            return got
        # A script's sibling module (`import losses` next to train.py).
        base = os.path.dirname(near.path)
        rel = os.path.join(base, *name.split("."))
        return self.by_path.get(rel + ".py") or self.by_path.get(os.path.join(rel, "__init__.py"))

    def _package_of(self, m: _Module, level: int) -> str | None:
        parts = m.name.split(".")
        if not m.is_package:
            parts = parts[:-1]
        if level > 1:
            if level - 1 >= len(parts):
                return None
            parts = parts[: len(parts) - (level - 1)]
        return ".".join(parts)

    def resolve(self, m: _Module, chain: str, depth: int = 0) -> tuple[_Module, str] | None:
        """The (module, qualname) of the project function that ``chain`` (spelled in ``m``)
        calls, or ``None``."""
        if depth > _MAX_DEPTH:
            return None
        inst_method = None
        if "()." in chain:
            chain, _, inst_method = chain.partition("().")
        parts = chain.split(".")
        s = m.s
        imp = s["imports"].get(parts[0])
        if imp is None:
            if depth and (parts[0] in s["defs"] or parts[0] in s["classes"] or parts[0] in s["aliases"]):
                return self._symbol(m, parts, inst_method, depth)
            return None
        kind, modname, level, name = imp
        if kind == "mod":
            target = self._module(modname, m) if not level else None
            rest = parts[1:]
            if target is None:
                return None
        else:
            pkg = self._package_of(m, level) if level else ""
            if pkg is None:
                return None
            base = ".".join(p for p in (pkg, modname) if p)
            sub = self._module(f"{base}.{name}" if base else name, m)
            if sub is not None:
                target, rest = sub, parts[1:]
            else:
                target = self._module(base, m) if base else None
                if target is None:
                    return None
                rest = [name, *parts[1:]]
        while len(rest) > 1:  # pkg.mod.f: descend through submodules
            sub = self._module(f"{target.name}.{rest[0]}", target)
            if sub is None:
                break
            target, rest = sub, rest[1:]
        if not rest:
            return None
        return self._symbol(target, rest, inst_method, depth + 1)

    def _symbol(self, m: _Module, names: list[str], inst_method: str | None, depth: int) -> tuple[_Module, str] | None:
        s = m.s
        if depth > _MAX_DEPTH:
            return None
        head = names[0]
        if head in s["classes"]:
            if inst_method is not None and len(names) == 1:
                return self._method(m, head, inst_method, depth)
            if len(names) == 2 and inst_method is None:
                return self._method(m, head, names[1], depth)
            return None  # a constructor (state built once) is not followed
        if head in s["defs"] and len(names) == 1 and inst_method is None:
            return m, head
        spelled = None
        if head in s["imports"]:
            spelled = ".".join(names)
        elif head in s["aliases"]:
            spelled = ".".join([s["aliases"][head], *names[1:]])
        if spelled is None:
            return None
        if inst_method is not None:
            spelled += "()." + inst_method
        return self.resolve(m, spelled, depth + 1)

    def _method(self, m: _Module, cls: str, meth: str, depth: int) -> tuple[_Module, str] | None:
        if depth > _MAX_DEPTH:
            return None
        info = m.s["classes"].get(cls)
        if info is None:
            return None
        if meth in info["methods"]:
            return m, f"{cls}.{meth}"
        for b in info["bases"]:
            if b in m.s["classes"]:
                got = self._method(m, b, meth, depth + 1)
            else:
                got = self.resolve(m, f"{b}().{meth}", depth + 1)
            if got is not None:
                return got
        return None

    # -- traced code -----------------------------------------------------------------------
    def _propagate(self) -> None:
        """Follow traced code along the call edges of the summaries, breadth first, at most
        ``MAX_MODULE_HOPS`` calls into other modules from a module's own traced code."""
        work: list[tuple[_Module, str, list, int]] = []
        for m in self.modules:
            for q, (root, line) in m.s["traced"].items():
                work.append((m, q, [root, m.disp, line], 0))
        self.hops: dict[tuple[str, str], int] = {}
        i = 0
        while i < len(work):
            m, q, entry, hops = work[i]
            i += 1
            for ref in m.s["calls"].get(q, ()):
                if ref.startswith("L:"):
                    target: tuple[_Module, str] | None = (m, ref[2:])
                    step = hops
                else:
                    target = self.resolve(m, ref[2:])
                    step = hops + 1
                if target is None or step > MAX_MODULE_HOPS:
                    continue
                tm, tq = target
                if tq in tm.s["traced"] or tq in tm.aware or tm.framework:
                    continue
                got = self.external.setdefault(tm.path, {})
                if tq in got:
                    continue
                got[tq] = entry
                self.hops[(tm.path, tq)] = step
                work.append((tm, tq, entry, step))

    def facts_for(self, path: str) -> Facts:
        """Functions of the module at ``path`` that the project's traced code reaches beyond
        what the module alone shows: qualname -> [entry qualname, entry path, entry line]."""
        return self.external.get(os.path.abspath(path), {})


def facts_digest(facts: Facts) -> str:
    """A stable text of ``facts`` for cache keys."""
    if not facts:
        return ""
    return ";".join(f"{q}={e[0]}@{e[1]}:{e[2]}" for q, e in sorted(facts.items()))
