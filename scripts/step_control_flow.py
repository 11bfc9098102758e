"""Where the sequential loop iterations of one vmapped HackMatrix step are, read off its jaxpr.

Why: on a GPU the vmapped env step is latency-bound. Every iteration of a ``while``
(lax.while_loop, fori_loop with traced bounds) or ``scan`` costs at least one kernel launch and
a device-to-host copy of the predicate (~10-30 us) whatever the batch size; an unbatched
``cond`` that survives vmap is an XLA conditional that syncs too; a while whose predicate is
batched ("lanes") runs until its slowest lane is done. This tool traces ``jax.vmap(fn)`` with
``jax.make_jaxpr`` (nothing is compiled or run), walks every sub-jaxpr (pjit, custom_jvp/vjp,
remat, cond branches, while cond/body, scan bodies) and lists each loop and cond: primitive,
user source location and caller, trip count (scan: ``length``, run in ``length / unroll``
iterations; while: exact when its predicate is ``counter < constant`` with the counter stepped
by a constant, "<=N" when such a comparison is and-ed with other terms or the limit is only
bounded, e.g. ``sum(active) <= len(active)``; else "dynamic"), nesting path, predicate kind
and the number of equations directly in its body (while: cond + body; cond: all branches).

Counted per step ("runs"): a loop's iterations times those of the loops around it, a loop in a
cond branch as if the branch ran; a cond once per run of its enclosing loops. A dynamic loop
without a bound counts ``--dynamic-trips`` (flagged "?"). The summary adds up everything under
each outermost loop/cond, per source location and caller, sorted by iterations + cond runs.
``env.step`` is traced without its own ``jax.jit`` (same jaxpr less the outer pjit): vmap of a
jitted function replays its equations under the call site's source info, which would put every
loop built by a custom_vmap rule (``core/sparse.py``) at that call site.

    python scripts/step_control_flow.py --num-envs 64 --function step --json /tmp/step.json
"""

import argparse
import json
import math
import os
import re
import sys
from dataclasses import asdict, dataclass

from purejaxrl.backend import choose_platforms
from purejaxrl.cli.parsing import ArgumentParser

choose_platforms()  # before anything imports JAX (purejaxrl.output_paths does)

from purejaxrl.output_paths import add_overwrite_argument, output_file_error, write_text

import jax
import jax.numpy as jnp
import numpy as np
from jax.extend import core as jcore
from jax.extend.source_info_util import summarize

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SWAPPED = {"lt": "gt", "le": "ge", "gt": "lt", "ge": "le", "ne": "ne"}  # a < b is b > a
IDENTITIES = ("convert_element_type", "copy", "copy_p", "squeeze", "reshape")
FOLDABLE = IDENTITIES + ("broadcast_in_dim", "add", "sub", "mul", "neg", "max", "min")
FRAME = re.compile(r"^(?P<file>.*?):(?P<line>\d+)(?::\d+)? \((?P<function>.*)\)$")
FUNCTIONS = ("step", "reset", "step_game", "enemy_turn", "direction", "observation",
             "exit_distance", "siphon", "programs", "generation")


@dataclass
class ControlFlow:
    id: int
    primitive: str        # while, scan or cond
    location: str         # file:line (function) of the innermost user frame
    callers: list         # the next user frames outward
    path: str             # ids of the enclosing loops/conds, outermost first, then its own
    depth: int
    trip: str             # "7", "<=100", "dynamic"; a cond: "2 branches"
    trips: int            # iterations counted per run (a cond: 1)
    exact: bool           # trip count known exactly (a cond: True)
    predicate: str        # "lanes" (batched), "scalar" (while, cond), "static" (scan)
    body_eqns: int        # equations directly in the body (while: cond + body)
    runs: int             # per step: trips x the trips of the enclosing loops


def user_frames(source_info, count=4):
    """file:line (function) of the user's frames, innermost first, this tool's left out."""
    frames = []
    for text in reversed(summarize(source_info, num_frames=count + 4).splitlines()):
        match = FRAME.match(text)
        path = os.path.abspath(match["file"]) if match else __file__
        if path != os.path.abspath(__file__):
            if path.startswith(REPO_ROOT + os.sep):
                path = os.path.relpath(path, REPO_ROOT)
            frames.append(f"{path}:{match['line']} ({match['function']})")
    return frames[:count] or ["unknown"]


class AtMost(float):
    """An upper bound of a traced value (``known[var]`` is an ndarray where it is exact)."""


def _value(atom, known):
    """What is known of ``atom``: its value (ndarray), an AtMost bound, or None."""
    return np.asarray(atom.val) if isinstance(atom, jcore.Literal) else known.get(atom)


def _scalar(value):
    """The value of a constant array whose elements are all equal, else None."""
    if not isinstance(value, np.ndarray) or value.size == 0 or np.any(value != value.flat[0]):
        return None
    return value.flat[0].item()


def _upper(atom, known):
    """An upper bound of every element of ``atom`` (a bool is at most 1), or None."""
    value = _value(atom, known)
    if isinstance(value, np.ndarray):
        return float(value.max()) if value.size and value.dtype != object else None
    return 1.0 if value is None and atom.aval.dtype == np.bool_ else value


def _fold(eqn, known):
    """Constant-fold cheap primitives whose inputs are known, else propagate upper bounds
    (loop limits such as ``n_acting = sum(active) <= len(active)``)."""
    name, values = eqn.primitive.name, [_value(v, known) for v in eqn.invars]
    if (name in FOLDABLE and all(isinstance(v, np.ndarray) for v in values)
            and all(math.prod(v.aval.shape) <= 4096 for v in eqn.outvars)):
        try:
            known[eqn.outvars[0]] = np.asarray(eqn.primitive.bind(*values, **eqn.params))
            return
        except Exception:  # noqa: BLE001 - folding is best effort
            pass
    ups = [_upper(v, known) for v in eqn.invars]
    cases = ups[1:] if name == "select_n" else ups
    bound = None
    if name in IDENTITIES + ("broadcast_in_dim",) or (name == "reduce_sum" and ups[0]):
        bound = ups[0] and ups[0] * math.prod(
            eqn.invars[0].aval.shape[a] for a in eqn.params.get("axes", ()))
    elif name in ("select_n", "add", "max") and None not in cases:
        bound = sum(cases) if name == "add" else max(cases)
    elif name == "min" and any(u is not None for u in ups):
        bound = min(u for u in ups if u is not None)
    if bound is not None:
        known[eqn.outvars[0]] = AtMost(bound)


def _closed(jaxpr, known_invars=()):
    """(open jaxpr, what is known of its constvars and of its first invars)."""
    known = {}
    if isinstance(jaxpr, jcore.ClosedJaxpr):
        known = {v: np.asarray(c) for v, c in zip(jaxpr.jaxpr.constvars, jaxpr.consts)
                 if hasattr(c, "dtype") and np.size(c) <= 4096}
        jaxpr = jaxpr.jaxpr
    if len(known_invars) <= len(jaxpr.invars):
        known.update({v: x for v, x in zip(jaxpr.invars, known_invars) if x is not None})
    return jaxpr, known


def while_trip_count(eqn, known):
    """(trip text, trips or None, exact) of a while (see the module docstring)."""
    p = eqn.params
    cond, body = p["cond_jaxpr"].jaxpr, p["body_jaxpr"].jaxpr
    nc, nb = p["cond_nconsts"], p["body_nconsts"]
    inits = [_value(v, known) for v in eqn.invars[nc + nb:]]
    _, cond_known = _closed(p["cond_jaxpr"], [_value(v, known) for v in eqn.invars[:nc]])
    carry, body_carry = cond.invars[nc:], body.invars[nb:]
    made_by = {out: e for e in cond.eqns + body.eqns for out in e.outvars}
    index = lambda atom: next((k for k, v in enumerate(carry) if v is atom), None)  # noqa: E731

    def step_of(k):  # what the body adds to carried value k, if a constant
        e = made_by.get(body.outvars[k]) if k is not None else None
        if e is None or e.primitive.name != "add" or all(v is not body_carry[k]
                                                         for v in e.invars):
            return None
        return _scalar(_value(e.invars[e.invars[0] is body_carry[k]], {}))

    def limit_of(atom):  # (limit, exact): a constant or a pass-through carry, else a bound
        k = index(atom)
        value = _value(atom, cond_known) if k is None else (
            inits[k] if body.outvars[k] is body_carry[k] else None)
        return (_scalar(value), True) if _scalar(value) is not None else (
            (value, False) if isinstance(value, AtMost) else (None, False))

    def trips_of(e):  # trip count (bound) of one comparison of a carried counter, or None
        (a, b), name = e.invars, e.primitive.name
        if step_of(index(a)) is None:
            a, b, name = b, a, SWAPPED[name]
        k, (limit, exact) = index(a), limit_of(b)
        start, step = (_scalar(inits[k]), step_of(k)) if k is not None else (None, None)
        if (None in (start, step, limit) or step <= 0 or name not in ("lt", "le", "ne")
                or (name == "ne" and not exact)):
            return None
        return max(0, math.ceil((limit + (name == "le") - start) / step)), exact

    alone, bounds, stack = True, [], [cond.outvars[0]]
    while stack:  # the predicate: comparisons, possibly and-ed, under type conversions
        e = made_by.get(stack.pop())
        if e is not None and e.primitive.name in IDENTITIES + ("and",):
            alone &= e.primitive.name != "and"
            stack.extend(e.invars)
        elif e is not None and e.primitive.name in SWAPPED and (found := trips_of(e)):
            bounds.append(found)
    if not bounds:
        return "dynamic", None, False
    if alone and bounds[0][1]:
        return str(bounds[0][0]), bounds[0][0], True
    trips = int(min(n for n, _ in bounds))
    return f"<={trips}", trips, False


def walk(jaxpr, known, found, parents=(), multiplier=1, dynamic_trips=1):
    """Append a ControlFlow to ``found`` for every loop and cond in ``jaxpr``, recursively."""
    for eqn in jaxpr.eqns:
        _fold(eqn, known)
        name, p = eqn.primitive.name, eqn.params
        values = [_value(v, known) for v in eqn.invars]
        if name not in ("while", "scan", "cond"):
            for sub in _sub_jaxprs(p):  # pjit, custom_jvp/vjp, remat: values flow through
                inner, inner_known = _closed(sub, values)
                walk(inner, inner_known, found, parents, multiplier, dynamic_trips)
                if len(inner.outvars) == len(eqn.outvars):
                    known.update({out: x for out, inner_out in zip(eqn.outvars, inner.outvars)
                                  if (x := _value(inner_out, inner_known)) is not None})
            continue
        if name == "scan":
            unroll = p["length"] if p["unroll"] is True else max(1, int(p["unroll"]))
            trip, trips, exact = str(p["length"]), math.ceil(p["length"] / unroll), True
            subs, predicate = [_closed(p["jaxpr"], values[:p["num_consts"]])], "static"
        elif name == "while":
            trip, trips, exact = while_trip_count(eqn, known)
            trips = dynamic_trips if trips is None else trips
            nc, nb = p["cond_nconsts"], p["body_nconsts"]
            subs = [_closed(p["cond_jaxpr"], values[:nc]),
                    _closed(p["body_jaxpr"], values[nc:nc + nb])]
            predicate = "lanes" if p["cond_jaxpr"].out_avals[0].shape else "scalar"
        else:  # a cond that survived vmap: its index is unbatched
            trip, trips, exact = f"{len(p['branches'])} branches", 1, True
            subs = [_closed(branch, values[1:]) for branch in p["branches"]]
            predicate = "scalar"
        frames, own = user_frames(eqn.source_info), len(found) + 1
        flow = ControlFlow(
            id=own, primitive=name, location=frames[0], callers=frames[1:],
            path=">".join(f"#{i}" for i in parents + (own,)), depth=len(parents), trip=trip,
            trips=trips, exact=exact, predicate=predicate,
            body_eqns=sum(len(sub.eqns) for sub, _ in subs), runs=multiplier * trips)
        found.append(flow)
        for sub, sub_known in subs:
            walk(sub, sub_known, found, parents + (own,),
                 multiplier if name == "cond" else flow.runs, dynamic_trips)
    return found


def _sub_jaxprs(params):
    for value in params.values():
        yield from (item for item in (value if isinstance(value, (tuple, list)) else (value,))
                    if isinstance(item, (jcore.Jaxpr, jcore.ClosedJaxpr)))


def control_flow(fn, *args, dynamic_trips=1):
    """Every loop and cond of ``fn(*args)``'s jaxpr (args may be jax.ShapeDtypeStruct)."""
    jaxpr, known = _closed(jax.make_jaxpr(fn)(*args))
    return walk(jaxpr, known, [], dynamic_trips=dynamic_trips)


def summary(flows):
    """One row per outermost loop/cond location and caller, most iterations + cond runs first."""
    groups = {}
    for f in flows:
        top = flows[int(f.path.split(">")[0][1:]) - 1]
        row = groups.setdefault((top.location, (top.callers or [""])[0]), dict(
            location=top.location, caller=(top.callers or [""])[0], outermost=0, loops=0,
            conds=0, loop_iterations=0, cond_runs=0, unbounded=0))
        loop = f.primitive != "cond"
        row["outermost"] += f is top
        row["loops" if loop else "conds"] += 1
        row["loop_iterations" if loop else "cond_runs"] += f.runs
        row["unbounded"] += f.trip == "dynamic"
    return sorted(groups.values(), key=lambda r: -(r["loop_iterations"] + r["cond_runs"]))


def hackmatrix_target(function, num_envs):
    """(jax.vmap(fn), abstract args) of one HackMatrix function, as profile_step.py runs it."""
    from envs.hackmatrix.core import enemies, game, generation, programs, rewards
    from envs.hackmatrix import observation
    from envs.hackmatrix.env import HackMatrix

    env = HackMatrix()
    params = env.default_params
    keys = jax.ShapeDtypeStruct((num_envs, 2), jnp.uint32)
    ints = jax.ShapeDtypeStruct((num_envs,), jnp.int32)
    if function == "reset":
        return jax.vmap(lambda k: env.reset_env(k, params)), (keys,)
    state = jax.eval_shape(jax.vmap(lambda k: env.reset_env(k, params)[1]), keys)
    step = getattr(HackMatrix.step, "__wrapped__", HackMatrix.step)  # see the docstring
    fn, args = {
        "step": (lambda k, s, a: step(env, k, s, a, params), (keys, state, ints)),
        "step_game": (lambda s, a, k: game.step_game(s, a, k), (state, ints, keys)),
        "enemy_turn": (lambda s, k: enemies.run_enemy_turn(s, k, True), (state, keys)),
        "direction": (game.direction_action, (state, ints)),
        "observation": (observation.build_observation, (state,)),
        "exit_distance": (rewards.player_exit_distance, (state,)),
        "siphon": (lambda s: (game.siphon_action(s), rewards.siphon_quality(s)), (state,)),
        "programs": (lambda s, p, k: programs.apply_program(s, p, k), (state, ints, keys)),
        "generation": (lambda s, k: generation.initialize_stage(s, k, True), (state, keys)),
    }[function]
    return jax.vmap(fn), args


def main(argv=None):
    parser = ArgumentParser(description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--num-envs", type=int, default=64)
    parser.add_argument("--function", choices=FUNCTIONS, default="step")
    parser.add_argument("--dynamic-trips", type=int, default=1, metavar="N",
                        help="iterations counted for a dynamic loop without a bound")
    parser.add_argument("--top", type=int, default=25, help="summary rows printed")
    parser.add_argument("--json", metavar="PATH",
                        help="write the loops, the summary and the total here")
    add_overwrite_argument(parser)
    args = parser.parse_args(argv)
    if args.num_envs < 1 or args.dynamic_trips < 0 or args.top < 1:
        parser.error("--num-envs and --top must be positive, --dynamic-trips >= 0")
    output_error = output_file_error(args.json, "--json", args.overwrite)
    if output_error:
        parser.error(output_error)
    fn, fn_args = hackmatrix_target(args.function, args.num_envs)
    flows = control_flow(fn, *fn_args, dynamic_trips=args.dynamic_trips)
    rows = summary(flows)
    print(f"jax.vmap({args.function}) over {args.num_envs} envs: {len(flows)} loops/conds\n"
          f"{'path':16s} {'prim':5s} {'trip':>10s} {'pred':6s} {'eqns':>5s} {'runs':>6s}  "
          "location <- caller")
    for f in flows:
        runs = ("" if f.exact else "?" if f.trip == "dynamic" else "<=") + str(f.runs)
        print(f"{'  ' * f.depth + f.path:16s} {f.primitive:5s} {f.trip:>10s} {f.predicate:6s} "
              f"{f.body_eqns:5d} {runs:>6s}  {f.location} <- {(f.callers or [''])[0]}")
    print(f"\n{'iters':>6s} {'conds':>5s} {'loops':>5s} {'?':>2s}  outermost location <- caller")
    for r in rows[:args.top]:
        print(f"{r['loop_iterations']:6d} {r['cond_runs']:5d} {r['loops']:5d} "
              f"{r['unbounded'] or '':>2}  {r['location']} <- {r['caller']}")
    total = {k: sum(r[k] for r in rows) for k in ("loop_iterations", "cond_runs", "unbounded")}
    print(f"total per step: {total['loop_iterations']} loop iterations + {total['cond_runs']} "
          f"cond runs; {total['unbounded']} dynamic loops without a bound, counted "
          f"{args.dynamic_trips} each")
    if args.json:
        write_text(args.json, json.dumps({"function": args.function, "num_envs": args.num_envs,
                                          "loops": [asdict(f) for f in flows], "summary": rows,
                                          "total": total}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
