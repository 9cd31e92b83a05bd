"""Loops, and which of them are training loops.

A training loop is a ``for``/``while`` loop whose body (not counting nested function
definitions) calls a ``tf.function`` of the module (decorated or wrapped; not a helper that is
traced only because traced code calls it), ``fit``/``train_on_batch``, an optimizer's
``apply_gradients``/``minimize``/``apply``, or ``tape.gradient``. A tf.function is a training
step when its traced code, as far as the module shows it, updates something (an optimizer's
step, a variable's ``assign``...); one whose code is not in the module counts as one. A loop
that only computes (tf.functions that update nothing: inference, sampling) or only computes
gradients (``tape.gradient``, or such tf.functions computing gradients) is not a training loop:
an attribution loop (integrated gradients, saliency maps) or a sampling loop collects what it
computes on purpose, and trains nothing.

A loop that runs at most once is no loop for the rules: ``for x in ds.take(1)``,
``for b in [next(iter(ds))]``, ``for i in range(1)``, or a body that ends in an unconditional
``break``/``return``/``raise``. ``enclosing_loops`` leaves such loops out, and they are never
training loops. ``iteration_bound(loop)`` is the literal number of iterations when the source
states one (``range(10)``, ``ds.take(5)``, a literal list).

What one iteration works on: ``element_of(loop, expr)`` tells whether ``expr`` is the loop's
current batch or sample (an element of a dataset or of a replay memory, a value drawn in the
iteration, a slice by the loop index, give or take a batch dimension), ``every_kth`` whether a
node runs only every k-th iteration, and ``over_listed_items`` whether the loop visits a literal
list of whole inputs. The rules about per-batch calls (``predict``, ``fit``) share these.
"""

from __future__ import annotations

import ast
import re
from functools import cached_property
from typing import TYPE_CHECKING

from tflint.analysis.astutil import walk_own as walk_body
from tflint.analysis.values import is_number_literal, number_constant, number_value

if TYPE_CHECKING:  # pragma: no cover
    from tflint.analysis import Analysis

LoopNode = ast.For | ast.AsyncFor | ast.While
_LOOPS = (ast.For, ast.AsyncFor, ast.While)
_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
TRAINING_METHODS = frozenset(
    {"fit", "train_on_batch", "apply_gradients", "minimize", "apply", "gradient", "train_step"}
)
# libraries whose functions called by a step do not hide an optimizer's update
_KNOWN_LIBRARIES = ("tensorflow.", "keras.", "tf_keras.", "numpy.", "math.", "functools.", "itertools.",
                    "collections.", "typing.", "logging.", "time.", "os.", "sys.", "random.")
# a training step or an optimizer's: the loop trains
STEP_METHODS = TRAINING_METHODS - {"gradient"}
# calls that change a model: an optimizer's step or a variable update
UPDATE_METHODS = STEP_METHODS | frozenset(
    {"assign", "assign_add", "assign_sub", "scatter_add", "scatter_sub", "scatter_update",
     "scatter_nd_add", "scatter_nd_sub", "scatter_nd_update"}
)


class LoopFacts:
    def __init__(self, analysis: "Analysis") -> None:
        self.a = analysis

    @cached_property
    def loops(self) -> list[LoopNode]:
        return [n for n in self.a.nodes(*_LOOPS) if isinstance(n, _LOOPS)]

    def enclosing_loops(self, node: ast.AST) -> list[LoopNode]:
        """Loops around ``node`` in the same function, innermost first (a loop's own
        ``iter``/``test`` does not count as inside it)."""
        out: list[LoopNode] = []
        child = node
        for anc in self.a.ancestors(node):
            if isinstance(anc, _FUNCS):
                break
            if isinstance(anc, _LOOPS) and child in (*anc.body, *anc.orelse) and not self.runs_once(anc):
                out.append(anc)
            child = anc
        return out

    # -- how many iterations ------------------------------------------------------------------
    def iteration_bound(self, loop: LoopNode) -> int | None:
        """The number of iterations the source states, or ``None``: ``range(N)``,
        ``range(a, b)``, ``<ds>.take(N)``, ``itertools.islice(x, N)``, ``x[:N]``, a literal list or tuple,
        ``[next(iter(ds))]``; 1 for a body that always leaves in its first iteration."""
        memo = self.__dict__.setdefault("_bounds", {})
        if loop in memo:
            return memo[loop]
        bound = None
        if isinstance(loop, (ast.For, ast.AsyncFor)):
            bound = self._iterable_bound(loop.iter)
        if _leaves_first_time(loop.body):
            bound = 1
        memo[loop] = bound
        return bound

    def runs_once(self, loop: LoopNode) -> bool:
        """The loop's body runs at most once (``for x in ds.take(1)``, ``... break`` at the end)."""
        bound = self.iteration_bound(loop)
        return bound is not None and bound <= 1

    def _iterable_bound(self, it: ast.AST) -> int | None:
        if isinstance(it, (ast.List, ast.Tuple, ast.Set)):
            if any(isinstance(e, ast.Starred) for e in it.elts):
                return None
            return len(it.elts)
        if isinstance(it, ast.Subscript) and isinstance(it.slice, ast.Slice) and it.slice.step is None:
            # ``x[:10]``, ``x[5:15]``: at most that many elements
            lower = _literal_int(it.slice.lower) if it.slice.lower is not None else 0
            upper = _literal_int(it.slice.upper) if it.slice.upper is not None else None
            if lower is not None and upper is not None and lower >= 0 and upper >= 0:
                return max(0, upper - lower)
            return None
        if not isinstance(it, ast.Call):
            return None
        f = it.func
        args = it.args
        if isinstance(f, ast.Attribute) and f.attr == "take" and len(args) == 1 and not it.keywords:
            return self._most(args[0])
        builtin = isinstance(f, ast.Name) and self.a.qualname(f) is None
        name = f.id if builtin else self.a.call_name(it)
        if name in ("range", "six.moves.range") and 1 <= len(args) <= 2 and not it.keywords:
            upper = self._ints(args[-1])
            lower = self._ints(args[0]) if len(args) == 2 else [0]
            if upper is None or lower is None:
                return None
            return max(0, max(upper) - min(lower))
        if name == "itertools.islice" and len(args) == 2:
            return self._most(args[1])
        if builtin and name in ("enumerate", "zip", "reversed", "list", "tuple", "sorted") and args:
            bounds = [self._iterable_bound(x) for x in args[: 1 if name != "zip" else None]]
            known = [b for b in bounds if b is not None]
            return min(known) if known else None
        return None

    def _ints(self, node: ast.AST) -> list[int] | None:
        """The ints ``node`` may hold: an int literal, or a name every binding of which is a
        non-negative int literal (``times = 1`` ... ``times = 5``; see :func:`number_constant`)."""
        value = _literal_int(node)
        if value is not None:
            return [value]
        if not isinstance(node, ast.Name) or not number_constant(self.a, node):
            return None
        values = [_literal_int(v) for v in self.a.traced.bindings(node.id, self.a.traced.defining_scope(node.id, node))]
        return values if values and all(v is not None and v >= 0 for v in values) else None

    def _most(self, node: ast.AST) -> int | None:
        values = self._ints(node)
        return max(values) if values else None

    @cached_property
    def _training(self) -> dict[LoopNode, bool]:
        result: dict[LoopNode, bool] = {}
        for loop in self.loops:
            is_training = False
            if self.runs_once(loop):
                result[loop] = False
                continue
            grads = updates = False
            for node in walk_body(loop.body):
                if not isinstance(node, ast.Call):
                    continue
                f = node.func
                if isinstance(f, ast.Attribute):
                    if f.attr in STEP_METHODS:
                        is_training = True
                        break
                    grads = grads or f.attr == "gradient"
                    updates = updates or f.attr in UPDATE_METHODS
                if self.is_step_call(node):
                    kind = self._step_kind(node)
                    if kind == "update":
                        is_training = True
                        break
                    grads = grads or kind == "gradients"
                elif isinstance(f, ast.Name) and not updates:
                    updates = self._updates(node)  # a helper of the module that applies them
            # gradients alone train nothing: an attribution loop (integrated gradients,
            # saliency maps) collects them on purpose; with an update (``v.assign_sub(lr * g)``,
            # a helper that applies them) the loop trains
            result[loop] = is_training or (grads and updates)
        return result

    def _reached(self, call: ast.Call) -> list[ast.AST]:
        """The module's functions ``call`` runs, with what they call in turn."""
        traced = self.a.traced
        targets = [t for t in traced._resolve_callable(call.func, call, called=True) if not isinstance(t, ast.Lambda)]
        return list(traced._reach(targets, lambda f: False)) if targets else []

    def _method_calls(self, call: ast.Call) -> list[str] | None:
        """The method names the module's functions that ``call`` runs call (``None``: ``call``
        runs no function of the module, or one of them calls a function imported from outside
        TensorFlow, Keras and NumPy, whose code the module does not show)."""
        reached = self._reached(call)
        if not reached:
            return None
        walk = self.a.traced._walk_traced_body
        out = []
        for func in reached:
            for n in walk(func):
                if not isinstance(n, ast.Call):
                    continue
                if isinstance(n.func, ast.Attribute):
                    out.append(n.func.attr)
                q = self.a.call_name(n)
                if q and "." in q and not q.startswith(_KNOWN_LIBRARIES) and not q.endswith("()"):
                    return None
        return out

    def _updates(self, call: ast.Call) -> bool:
        """A function of the module that ``call`` runs updates a model (an optimizer's step, a
        variable's ``assign``...)."""
        return any(m in UPDATE_METHODS for m in self._method_calls(call) or ())

    def _step_kind(self, call: ast.Call) -> str:
        """What the tf.function ``call`` runs does, as far as the module shows its traced code:
        ``"update"`` (an optimizer's step or a variable update; also when its code is not in
        the module), ``"gradients"`` (computes gradients, updates nothing) or ``"compute"``
        (neither: inference, sampling)."""
        methods = self._method_calls(call)
        if methods is None or any(m in UPDATE_METHODS for m in methods):
            return "update"
        return "gradients" if "gradient" in methods else "compute"

    def is_step_call(self, call: ast.Call) -> bool:
        """``call`` calls a ``tf.function`` of the module: a ``@tf.function`` def, a name or
        ``self.`` attribute bound to ``tf.function(...)``. A helper that is traced only because
        traced code calls it is not a step: called from eager code, it runs eagerly."""
        if not self.a.traced.reasons or not self.a.mentions("function"):
            return False  # no tf.function in the module
        f = call.func
        if isinstance(f, ast.Name) and f.id in self.traced_names:
            return True
        if isinstance(f, (ast.Name, ast.Attribute)):
            return self.a.traced.tf_function_creation(f, call) is not None
        return False

    @cached_property
    def traced_names(self) -> set[str]:
        """Module-level names bound to tf.functions (``step = tf.function(f)`` or a
        ``@tf.function`` def; not helpers traced only because traced code calls them)."""
        names: set[str] = set()
        traced = self.a.traced
        for stmt in self.a.tree.body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and (
                traced.tf_function_decorator(stmt) is not None
            ):
                names.add(stmt.name)
            elif isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Call):
                from tflint.analysis.traced import TF_FUNCTION

                if self.a.call_name(stmt.value) in TF_FUNCTION:
                    names.update(t.id for t in stmt.targets if isinstance(t, ast.Name))
        return names

    def is_training_loop(self, loop: LoopNode) -> bool:
        return self._training.get(loop, False)

    def in_training_loop(self, node: ast.AST) -> LoopNode | None:
        """The innermost training loop around ``node`` in the same function, if any."""
        for loop in self.enclosing_loops(node):
            if self.is_training_loop(loop):
                return loop
        return None

    def loop_variables(self, loop: LoopNode) -> set[str]:
        """Names that change every iteration: the ``for`` target(s) and names augmented
        (``i += 1``) in the body."""
        names: set[str] = set()
        if isinstance(loop, (ast.For, ast.AsyncFor)):
            names.update(n.id for n in ast.walk(loop.target) if isinstance(n, ast.Name))
        for node in walk_body(loop.body):
            if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
                names.add(node.target.id)
        return names

    # -- per-iteration values --------------------------------------------------------------
    def python_scalars(self, loop: LoopNode) -> dict[str, str]:
        """Names holding a Python number that changes every iteration, with how: the index of
        ``for i in range(...)`` / ``enumerate(...)`` / a literal list of numbers /
        ``itertools.count()``, and counters (``i += 1`` on a name only ever bound to numbers)."""
        cache = self.__dict__.setdefault("_scalars", {})
        got = cache.get(loop)
        if got is not None:
            return got
        out: dict[str, str] = {}
        if isinstance(loop, (ast.For, ast.AsyncFor)):
            for name, how in self._scalar_targets(loop.target, loop.iter):
                out[name] = how
        scope = self.a.enclosing_function(loop) or self.a.tree
        traced = self.a.traced
        for node in walk_body(loop.body):
            if (
                isinstance(node, ast.AugAssign)
                and isinstance(node.target, ast.Name)
                and isinstance(node.op, (ast.Add, ast.Sub))
                and is_number_literal(node.value)
            ):
                values = traced.bindings(node.target.id, scope)
                if values and all(is_number_literal(v) for v in values):
                    out.setdefault(node.target.id, f"counter incremented on line {node.lineno}")
        # names computed from those by plain arithmetic: `lr = base_lr * 0.5 ** epoch`
        assigns = [
            n for n in walk_body(loop.body)
            if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name)
        ]
        changed = True
        while changed:
            changed = False
            for node in assigns:
                name = node.targets[0].id
                if name not in out and _scalar_expr(node.value, out, self.a):
                    out[name] = f"computed from the loop value on line {node.lineno}"
                    changed = True
        cache[loop] = out
        return out

    def _scalar_targets(self, target: ast.AST, it: ast.AST):
        if not isinstance(it, ast.Call):
            if isinstance(it, (ast.List, ast.Tuple)) and it.elts and all(is_number_literal(e) for e in it.elts):
                if isinstance(target, ast.Name):
                    yield target.id, f"loop value from the list on line {it.lineno}"
            return
        name = self.a.call_name(it)
        f = it.func
        builtin = isinstance(f, ast.Name) and self.a.qualname(f) is None
        if (builtin and f.id == "range") or name in ("itertools.count", "six.moves.range"):
            if isinstance(target, ast.Name):
                yield target.id, f"loop index from `{f.id if builtin else name}(...)` on line {it.lineno}"
        elif builtin and f.id == "enumerate":
            if isinstance(target, (ast.Tuple, ast.List)) and target.elts and isinstance(target.elts[0], ast.Name):
                yield target.elts[0].id, f"loop index from `enumerate(...)` on line {it.lineno}"
        elif builtin and f.id == "zip" and isinstance(target, (ast.Tuple, ast.List)):
            for el, arg in zip(target.elts, it.args):
                yield from self._scalar_targets(el, arg)

    def body_binding(self, loop: LoopNode, name: str) -> ast.AST | None:
        """The value of the one plain assignment ``name = value`` in ``loop``'s body (nested
        functions left out), when there is exactly one."""
        values = [
            n.value for n in walk_body(loop.body)
            if isinstance(n, ast.Assign) and len(n.targets) == 1
            and isinstance(n.targets[0], ast.Name) and n.targets[0].id == name
        ]
        return values[0] if len(values) == 1 else None

    def varying_names(self, loop: LoopNode) -> set[str]:
        """Names whose value comes from the current iteration: the ``for`` targets, counters,
        the :meth:`fresh_names`, and names computed from those."""
        cache = self.__dict__.setdefault("_varying", {})
        got = cache.get(loop)
        if got is None:
            got = cache[loop] = self._computed_from(loop, set(self.loop_variables(loop)))
        return got

    def fresh_names(self, loop: LoopNode) -> set[str]:
        """Names that hold a new value drawn in each iteration: bound in the body from
        ``next(...)`` or from an environment's step (``state, reward, done, info =
        env.step(action)``: a new observation per call), and names computed from those
        (``state = next_state``, ``x = np.reshape(state, [1, 4])``)."""
        cache = self.__dict__.setdefault("_fresh", {})
        got = cache.get(loop)
        if got is None:
            got = cache[loop] = self._computed_from(loop, set())
        return got

    def _computed_from(self, loop: LoopNode, names: set[str]) -> set[str]:
        """``names`` and the names the body binds from them, from ``next(...)`` or from an
        environment's step, to a fixed point."""
        names = set(names)
        assigns = [n for n in walk_body(loop.body) if isinstance(n, (ast.Assign, ast.AnnAssign, ast.AugAssign))]
        changed = True
        while changed:
            changed = False
            for node in assigns:
                value = node.value
                if value is None:
                    continue
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                new = {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)} - names
                if not new:
                    continue
                if _uses(value, names) or any(gives_new_value(c) for c in ast.walk(value)):
                    names |= new
                    changed = True
        return names

    def is_over_runs(self, loop: LoopNode) -> bool:
        """Whether a loop iterates a few runs rather than data: epochs, folds, checkpoints,
        trials (``for epoch in range(epochs)``, ``for ckpt in checkpoints``), or a fixed
        collection of datasets/models (``for name, ds in sets.items()``, ``for m in [a, b]``)."""
        if not isinstance(loop, (ast.For, ast.AsyncFor)):
            return False
        words = " ".join(
            [n.id for n in ast.walk(loop.target) if isinstance(n, ast.Name)]
            + [n.id for n in ast.walk(loop.iter) if isinstance(n, ast.Name)]
            + [n.attr for n in ast.walk(loop.iter) if isinstance(n, ast.Attribute)]
        ).lower()
        tokens = set(re.split(r"[^a-z]+", words))
        if any(w in tokens or w + "s" in tokens for w in _RUN_WORDS):
            # a loop that steps an environment in its own body steps, whatever its target is
            # called (``for ep in range(100): ... env.step(action)``)
            return not any(gives_new_value(n) and isinstance(n.func, ast.Attribute) for n in _own_iteration(loop))
        it = loop.iter
        if isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute) and it.func.attr in ("items", "values", "keys"):
            return True
        return isinstance(it, (ast.List, ast.Tuple)) and all(
            isinstance(e, (ast.Name, ast.Attribute, ast.Tuple)) for e in it.elts
        )

    # -- the current element: what one iteration of a loop works on ---------------------------
    # A slice of more rows than this is a chunk of a large dataset loaded piece by piece: a call
    # on it (``fit``) runs many steps, and its setup is a small share of the call.
    CHUNK_ROWS = 4096

    def element_of(self, loop: LoopNode, expr: ast.AST, depth: int = 0) -> str | None:
        """How ``expr`` is one batch or sample of ``loop``, as source text: a target of a loop
        over a dataset or a replay sample, a value drawn in the iteration (``next(it)``, an
        environment's observation), or a slice of an array by the loop index (a bare ``x[i]``
        counts only inside a wrapper that gives it a batch dimension); ``None`` when it is not
        known to be."""
        a = self.a
        inner, wrapped = strip_batch_dim(a, expr)
        elements = self.element_targets(loop)
        if isinstance(inner, ast.Name):
            if inner.id in elements or inner.id in self.fresh_names(loop) or self.replay_sample(loop, inner):
                return inner.id
            if depth < 3:
                bound = self.body_binding(loop, inner.id)
                if bound is not None and self.element_of(loop, bound, depth + 1) is not None:
                    return inner.id
            return None
        if isinstance(inner, ast.Subscript):
            if isinstance(inner.value, ast.Name) and inner.value.id in elements:
                return a.segment(expr)  # `item[0]` of a dataset element
            index = set(self.python_scalars(loop))
            sl = inner.slice
            if isinstance(sl, ast.Name) and self.replay_sample(loop, sl):
                return a.segment(expr)  # `x[idx]`, `idx` a minibatch of a replay memory's indices
            if isinstance(sl, ast.Name) and sl.id not in index:
                # `b = perm[i * 32:(i + 1) * 32]` in the body, then `x[b]`: a batch of indices
                bound = self.body_binding(loop, sl.id)
                if (isinstance(bound, ast.Subscript) and isinstance(bound.slice, ast.Slice)
                        and any(isinstance(n, ast.Name) and n.id in index for n in ast.walk(bound.slice))):
                    return a.segment(expr)
                return None
            if not any(isinstance(n, ast.Name) and n.id in index for n in ast.walk(sl)):
                return None
            if isinstance(sl, ast.Slice) and self._chunk(loop, sl):
                return None
            if isinstance(sl, ast.Slice) or wrapped:
                return a.segment(expr)
        return None

    def _chunk(self, loop: LoopNode, sl: ast.Slice) -> bool:
        """``x[i:i + 100000]``, or a slice by the index of ``range(0, n, 100000)``: more rows
        than ``CHUNK_ROWS`` per iteration."""
        up = sl.upper
        if isinstance(up, ast.BinOp) and isinstance(up.op, ast.Add):
            width = number_value(self.a, up.right)
            if type(width) is int and width > self.CHUNK_ROWS:
                return True
        it = getattr(loop, "iter", None)
        if (isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range"
                and len(it.args) == 3):
            step = number_value(self.a, it.args[2])
            return type(step) is int and step > self.CHUNK_ROWS
        return False

    def replay_sample(self, loop: LoopNode, expr: ast.AST) -> bool:
        """``expr`` comes from a minibatch drawn from a replay memory in the loop body
        (``batch = random.sample(self.memory, 32)``, ``idx = np.random.choice(len(buffer), 64)``),
        through the body's assignments: one sampled batch per iteration."""

        def values(name: str) -> list[ast.AST]:
            bound = self.body_binding(loop, name)
            return [] if bound is None else [bound]

        return from_memory(self.a, expr, values)

    def element_targets(self, loop: LoopNode) -> set[str]:
        """Names bound by ``loop``'s target to one element of a batch or sample source: a
        ``tf.data`` dataset, transitions of a replay memory (a target of three names or more,
        ``for s, a, r, s2, done in memory``), or a ``random.sample`` of one."""
        if not isinstance(loop, (ast.For, ast.AsyncFor)):
            return set()
        a = self.a
        it, target = loop.iter, loop.target
        if (isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "enumerate"
                and it.args and isinstance(target, ast.Tuple) and len(target.elts) == 2):
            it, target = it.args[0], target.elts[1]
        names = {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
        if a.datasets.is_dataset(it) or (
            isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute) and it.func.attr in FLOW_METHODS
        ):
            return names  # a dataset's elements, or an ImageDataGenerator's batches
        transitions = isinstance(target, ast.Tuple) and len(target.elts) >= 3
        if transitions and any(w in a.segment(it).lower() for w in REPLAY_WORDS):
            return names  # `for s, a, r, s2, done in replay_memory:` one transition at a time
        sample = it
        if isinstance(it, ast.Name):
            scope = a.enclosing_function(loop) or a.tree
            binds = a.traced.bindings(it.id, scope)
            sample = binds[0] if len(binds) == 1 else None
        if not (isinstance(sample, ast.Call) and a.call_name(sample) in ("random.sample", "random.choices") and sample.args):
            return set()
        pool = a.segment(sample.args[0]).lower()
        return names if transitions or any(w in pool for w in REPLAY_WORDS) else set()

    def every_kth(self, node: ast.AST, loop: LoopNode) -> bool:
        """``node`` runs only every k-th iteration of ``loop``: under an ``if`` of the loop body
        that tests ``step % k``, the length of a list that the ``if`` empties again
        (``if len(states) >= update_every: ...; states = []``, a PPO update), or the end of an
        episode (``if done:``, ``done`` a flag the body unpacks from ``env.step(...)``)."""
        ends = _episode_flags(loop)
        child = node
        for anc in self.a.ancestors(node):
            if anc is loop:
                return False
            if isinstance(anc, ast.If) and child in anc.body:
                test = anc.test
                if any(isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mod) for n in ast.walk(test)):
                    return True
                if ends and not any(isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.Not) for n in ast.walk(test)) \
                        and not any(isinstance(n, ast.Compare) and any(isinstance(o, (ast.NotEq, ast.IsNot)) for o in n.ops)
                                    for n in ast.walk(test)) \
                        and any(isinstance(n, ast.Name) and n.id in ends for n in ast.walk(test)):
                    return True
                measured = {n.args[0].id for n in ast.walk(test)
                            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "len"
                            and n.args and isinstance(n.args[0], ast.Name)}
                for n in (x for stmt in anc.body for x in ast.walk(stmt)):
                    if (isinstance(n, ast.Assign) and isinstance(n.value, ast.List) and not n.value.elts
                            and any(isinstance(t, ast.Name) and t.id in measured for t in n.targets)):
                        return True
                    if (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "clear"
                            and isinstance(n.func.value, ast.Name) and n.func.value.id in measured):
                        return True
            child = anc
        return False

    @staticmethod
    def over_listed_items(loop: LoopNode) -> bool:
        """``for data in [x, x_flipped]:`` (or ``enumerate``/``zip`` of such lists): the source
        lists each item the loop visits, a whole input each (the training and the test split, an
        image and its mirror), not the batches of one."""
        if not isinstance(loop, (ast.For, ast.AsyncFor)):
            return False
        it = loop.iter
        if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id in ("enumerate", "zip") and it.args:
            return all(isinstance(x, (ast.List, ast.Tuple)) for x in (it.args if it.func.id == "zip" else it.args[:1]))
        return isinstance(it, (ast.List, ast.Tuple)) and not any(isinstance(e, ast.Starred) for e in it.elts)


def _own_iteration(loop: LoopNode):
    """The nodes of ``loop``'s body outside its nested loops and functions."""
    nested = (*_LOOPS, ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
    stack = [n for n in loop.body if not isinstance(n, nested)]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(c for c in ast.iter_child_nodes(node) if not isinstance(c, nested))


def gives_new_value(node: ast.AST) -> bool:
    """``next(it)``, or ``env.step(action)`` / ``self.train_env.step(action)`` (a receiver named
    like an environment, not ``inventory``): a call that gives a new value each time."""
    if not isinstance(node, ast.Call):
        return False
    f = node.func
    if isinstance(f, ast.Name):
        return f.id == "next"
    if not (isinstance(f, ast.Attribute) and f.attr == "step"):
        return False
    recv = f.value
    name = recv.id if isinstance(recv, ast.Name) else recv.attr if isinstance(recv, ast.Attribute) else ""
    return any(part.startswith("env") for part in name.lower().split("_"))  # env, train_env, envs


def _literal_int(node: ast.AST) -> int | None:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    return None


def _leaves_first_time(body: list[ast.stmt]) -> bool:
    """The body's last statement leaves the loop unconditionally and nothing before it can
    start the next iteration (a ``continue`` of this loop, not of a nested one)."""
    if not body or not isinstance(body[-1], (ast.Break, ast.Return, ast.Raise)):
        return False
    stack: list[ast.AST] = list(body)
    while stack:
        n = stack.pop()
        if isinstance(n, ast.Continue):
            return False
        if isinstance(n, (*_LOOPS, *_FUNCS)):
            continue
        stack.extend(ast.iter_child_nodes(n))
    return True


_RUN_WORDS = ("epoch", "ep", "fold", "ckpt", "checkpoint", "trial", "seed", "round", "repeat", "run", "config")


def _scalar_expr(expr: ast.AST, scalars: dict[str, str], a: "Analysis") -> bool:
    """Arithmetic on numbers, number constants (``LIMIT = 1250``) and the names in ``scalars``
    that uses at least one of those names."""
    used = False
    for n in ast.walk(expr):
        if isinstance(n, ast.Name):
            if n.id in scalars:
                used = True
            elif not ((n.id in ("int", "float", "round", "abs", "min", "max") and a.qualname(n) is None)
                      or number_constant(a, n)):
                return False
        elif isinstance(n, ast.Call):
            if not isinstance(n.func, ast.Name):
                return False
        elif not isinstance(n, (ast.BinOp, ast.UnaryOp, ast.Constant, ast.operator, ast.unaryop, ast.Load)):
            return False
    return used


def _uses(expr: ast.AST, names: set[str]) -> bool:
    return any(isinstance(n, ast.Name) and n.id in names for n in ast.walk(expr))


# -- samples: a batch dimension, a replay memory ------------------------------------------------
# wrappers that only give one sample a batch dimension (or convert it): the data is still the
# loop's sample
BATCH_DIM_CALLS = frozenset(
    {
        "numpy.expand_dims", "numpy.reshape", "numpy.array", "numpy.asarray", "numpy.atleast_2d",
        "tensorflow.expand_dims", "tensorflow.reshape", "tensorflow.convert_to_tensor", "tensorflow.constant",
    }
)
REPLAY_WORDS = ("memory", "buffer", "replay", "experience")
FLOW_METHODS = frozenset({"flow", "flow_from_directory", "flow_from_dataframe"})
SAMPLERS = frozenset({"random.sample", "random.choices", "numpy.random.choice", "numpy.random.randint"})


def _episode_flags(loop: LoopNode) -> set[str]:
    """Names that ``loop``'s body unpacks from an environment's step after the observation and
    the reward (``obs, reward, done, info = env.step(a)``: ``done``, ``info``)."""
    out: set[str] = set()
    for n in ast.walk(loop):
        if (isinstance(n, ast.Assign) and isinstance(n.value, ast.Call) and isinstance(n.value.func, ast.Attribute)
                and gives_new_value(n.value)):
            for t in n.targets:
                if isinstance(t, (ast.Tuple, ast.List)) and len(t.elts) >= 3:
                    out |= {e.id for e in t.elts[2:] if isinstance(e, ast.Name)}
    return out


def draws_from_memory(a: "Analysis", call: ast.Call) -> bool:
    """``random.sample(self.memory, 32)``, ``np.random.choice(len(buffer), 64)`` or a replay
    buffer's own ``self.buffer.sample(32)``: a minibatch drawn from a replay memory."""
    if a.call_name(call) in SAMPLERS and call.args:
        return any(w in a.segment(call.args[0]).lower() for w in REPLAY_WORDS)
    f = call.func
    return (isinstance(f, ast.Attribute) and f.attr in ("sample", "sample_batch")
            and any(w in a.segment(f.value).lower() for w in REPLAY_WORDS))


def from_memory(a: "Analysis", expr: ast.AST, values, depth: int = 0) -> bool:
    """``expr`` contains a draw from a replay memory, directly or through the values that
    ``values(name)`` gives for the names it reads (at most four steps back)."""
    for n in ast.walk(expr):
        if isinstance(n, ast.Call) and draws_from_memory(a, n):
            return True
        if isinstance(n, ast.Name) and depth < 4:
            if any(v is not expr and from_memory(a, v, values, depth + 1) for v in values(n.id)):
                return True
    return False


def strip_batch_dim(a: "Analysis", expr: ast.AST) -> tuple[ast.AST, bool]:
    """``np.expand_dims(x[i], 0)``, ``x[i].reshape(1, -1)``, ``np.array([x[i]])``,
    ``x[i][None]`` → (``x[i]``, True); anything else → (itself, False)."""
    wrapped = False
    for _ in range(4):
        if isinstance(expr, ast.Call) and expr.args and a.call_name(expr) in BATCH_DIM_CALLS:
            expr = expr.args[0]
        elif isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr == "reshape":
            expr = expr.func.value
        elif isinstance(expr, (ast.List, ast.Tuple)) and len(expr.elts) == 1:
            expr = expr.elts[0]
        elif isinstance(expr, ast.Subscript) and _adds_axis(expr.slice):
            expr = expr.value
        else:
            break
        wrapped = True
    return expr, wrapped


def _adds_axis(sl: ast.AST) -> bool:
    parts = sl.elts if isinstance(sl, ast.Tuple) else [sl]
    return any(
        (isinstance(p, ast.Constant) and p.value is None) or (isinstance(p, ast.Attribute) and p.attr == "newaxis")
        for p in parts
    )
