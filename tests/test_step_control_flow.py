"""scripts/step_control_flow.py: the jaxpr walker on a hand-made function whose loops are known
(trip counts, nesting, predicate kinds and the per-step total), and its one-line CLI errors.

Counted: a loop's iterations times those of the loops around it, so a fori_loop of 7 around a
scan of 3 is 7 + 7 * 3 = 28 iterations; a cond in that loop runs 7 times."""

import jax
import jax.numpy as jnp
import pytest

from scripts.step_control_flow import control_flow, main, summary


def _known_loops(x, flag):
    def outer(i, c):
        c, _ = jax.lax.scan(lambda c, _: (c + 1.0, None), c, None, length=3)
        return jax.lax.cond(flag > 0, lambda: c * 2.0, lambda: c)  # unbatched: stays a cond

    x = jax.lax.fori_loop(0, 7, outer, x)  # static bounds: a scan of 7
    x = jax.lax.cond(x > 0, lambda: x, lambda: -x)  # batched under vmap: a select, not a cond
    _, x = jax.lax.while_loop(lambda c: c[0] < 5, lambda c: (c[0] + 1, c[1] * 2.0), (0, x))
    # Lane-dependent exit, counter stepped by 2 below 10: at most 5 iterations.
    _, x = jax.lax.while_loop(lambda c: (c[0] < 10) & (c[1] < 1e3),
                              lambda c: (c[0] + 2, c[1] * 3.0), (0, x))
    return x


def test_the_walker_reports_known_loops_exactly():
    flows = control_flow(jax.vmap(_known_loops, in_axes=(0, None)), jnp.ones(4), jnp.int32(1))
    got = [(f.primitive, f.path, f.depth, f.trip, f.exact, f.predicate, f.runs) for f in flows]
    assert got == [
        ("scan", "#1", 0, "7", True, "static", 7),
        ("scan", "#1>#2", 1, "3", True, "static", 21),
        ("cond", "#1>#3", 1, "2 branches", True, "scalar", 7),
        ("while", "#4", 0, "5", True, "scalar", 5),
        ("while", "#5", 0, "<=5", False, "lanes", 5),
    ]
    assert all("test_step_control_flow.py" in f.location for f in flows)
    assert flows[0].body_eqns > 0 and flows[2].body_eqns == 1  # the doubling branch

    rows = summary(flows)
    assert (rows[0]["loop_iterations"], rows[0]["cond_runs"], rows[0]["loops"]) == (28, 7, 2)
    assert sum(r["loop_iterations"] for r in rows) == 7 + 7 * 3 + 5 + 5
    assert sum(r["cond_runs"] for r in rows) == 7
    assert sum(r["unbounded"] for r in rows) == 0


def test_bad_flags_are_one_error_line_before_any_work(capsys):
    """A bad value or an unknown choice: one line on stderr starting ``error: ``, exit 2, before
    anything is traced (the project's rule for every command line)."""
    for bad in (["--num-envs", "0"], ["--function", "nope"]):
        with pytest.raises(SystemExit) as exit_:
            main(bad)
        err = capsys.readouterr().err
        assert exit_.value.code == 2
        assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err
