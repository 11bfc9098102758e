"""sparse_update: under vmap, only enabled lanes run the work, in chunks, and the result
equals the per-lane semantics (work where enabled, carry elsewhere)."""

import jax
import jax.extend
import jax.numpy as jnp
import numpy as np

from envs.hackmatrix.core.sparse import ragged_loop, sparse_update


def _work(carry, key, scale):
    value, count = carry
    return value * scale + jax.random.uniform(key), count + 1


RUN = sparse_update(_work)


def _reference(enabled, carry, keys, scale):
    out = [jax.tree.map(lambda x: x[i], carry) for i in range(len(enabled))]
    for i, on in enumerate(enabled):
        if on:
            out[i] = _work(out[i], keys[i], scale[i])
    return jax.tree.map(lambda *xs: jnp.stack(xs), *out)


def test_vmapped_equals_per_lane_semantics_over_several_chunks():
    n = 40  # chunk size 16: 30 enabled lanes need two chunks
    rng = np.random.default_rng(0)
    enabled = jnp.asarray(rng.random(n) < 0.75)
    carry = (jnp.arange(n, dtype=jnp.float32), jnp.zeros(n, jnp.int32))
    keys = jax.random.split(jax.random.PRNGKey(0), n)
    scale = jnp.asarray(rng.random(n), jnp.float32)
    got = jax.jit(jax.vmap(RUN))(enabled, carry, keys, scale)
    want = _reference(np.asarray(enabled), carry, keys, scale)
    assert int(jnp.sum(enabled)) > 16
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-6)


def test_unbatched_and_unbatched_arguments():
    key = jax.random.PRNGKey(1)
    value, count = RUN(jnp.bool_(False), (jnp.float32(2.0), jnp.int32(5)), key, jnp.float32(3.0))
    assert float(value) == 2.0 and int(count) == 5
    value, count = RUN(jnp.bool_(True), (jnp.float32(2.0), jnp.int32(5)), key, jnp.float32(3.0))
    assert int(count) == 6 and float(value) >= 6.0
    # A scale shared by every lane (not batched) is broadcast by the batching rule.
    enabled = jnp.array([True, False, True])
    out = jax.vmap(RUN, in_axes=(0, 0, 0, None))(
        enabled, (jnp.ones(3), jnp.zeros(3, jnp.int32)), jax.random.split(key, 3), jnp.float32(0.0))
    np.testing.assert_array_equal(np.asarray(out[1]), [1, 0, 1])


def test_no_enabled_lane_leaves_everything_unchanged():
    n = 8
    carry = (jnp.arange(n, dtype=jnp.float32), jnp.arange(n, dtype=jnp.int32))
    out = jax.vmap(RUN)(jnp.zeros(n, bool), carry, jax.random.split(jax.random.PRNGKey(2), n),
                        jnp.ones(n))
    for o, c in zip(out, carry):
        np.testing.assert_array_equal(np.asarray(o), np.asarray(c))


def _count_up(k, carry, consts):
    total, last = carry
    step, = consts
    return total + step * (k + 1), k


RAGGED = ragged_loop(_count_up)


def test_ragged_loop_equals_each_lane_looping_its_own_trips():
    """Lanes with 0..9 trips in blocks of 16 (sorted by trips) give each lane the carry of its
    own loop, in its own place."""
    n = 50
    rng = np.random.default_rng(3)
    trips = jnp.asarray(rng.integers(0, 10, n), jnp.int32)
    step = jnp.asarray(rng.integers(1, 5, n), jnp.int32)
    carry = (jnp.arange(n, dtype=jnp.int32), jnp.full(n, -1, jnp.int32))
    total, last = jax.jit(jax.vmap(RAGGED))(trips, carry, (step,))
    t, s = np.asarray(trips), np.asarray(step)
    np.testing.assert_array_equal(np.asarray(total), np.arange(n) + s * t * (t + 1) // 2)
    np.testing.assert_array_equal(np.asarray(last), np.where(t > 0, t - 1, -1))
    # unbatched constants are broadcast; one lane alone loops its own trips
    total, _ = jax.vmap(RAGGED, in_axes=(0, 0, None))(trips, carry, (jnp.int32(2),))
    np.testing.assert_array_equal(np.asarray(total), np.arange(n) + t * (t + 1))
    alone, _ = RAGGED(jnp.int32(4), (jnp.int32(0), jnp.int32(-1)), (jnp.int32(1),))
    assert int(alone) == 10


def test_ragged_loop_under_two_vmaps():
    """Seeds x envs (``--num-seeds`` vmaps the env step twice): each lane still loops its own
    trips."""
    rng = np.random.default_rng(4)
    trips = jnp.asarray(rng.integers(0, 6, (3, 40)), jnp.int32)
    carry = (jnp.zeros((3, 40), jnp.int32), jnp.full((3, 40), -1, jnp.int32))
    total, last = jax.jit(jax.vmap(jax.vmap(RAGGED)))(trips, carry, (jnp.ones((3, 40), jnp.int32),))
    t = np.asarray(trips)
    np.testing.assert_array_equal(np.asarray(total), t * (t + 1) // 2)
    np.testing.assert_array_equal(np.asarray(last), np.where(t > 0, t - 1, -1))


def _loop_shapes(jaxpr) -> set:
    """The shapes of every value the while loops of ``jaxpr`` (and the loops within) compute."""
    shapes = set()
    for eqn in jaxpr.eqns:
        if eqn.primitive.name == "while":
            body = eqn.params["body_jaxpr"].jaxpr
            shapes |= {tuple(v.aval.shape) for e in body.eqns for v in e.outvars}
        for sub in jax.extend.core.jaxprs_in_params(eqn.params):
            shapes |= _loop_shapes(sub)
    return shapes


def test_sparse_update_under_two_vmaps_chunks_the_whole_batch():
    """Seeds x envs or boards x worlds: the per-lane semantics hold, and the chunks are cut from
    all 8 x 40 lanes at once (the work's values in the loop are [16], one chunk of the folded
    batch), not one chunk of 40 per outer lane ([8, 16]: every outer lane paying whenever any
    lane of the batch needs the work)."""
    m, n = 8, 40
    rng = np.random.default_rng(5)
    enabled = jnp.asarray(rng.random((m, n)) < 0.05)
    carry = (jnp.arange(m * n, dtype=jnp.float32).reshape(m, n), jnp.zeros((m, n), jnp.int32))
    keys = jax.random.split(jax.random.PRNGKey(6), m * n).reshape(m, n, -1)
    scale = jnp.asarray(rng.random((m, n)), jnp.float32)
    twice = jax.vmap(jax.vmap(RUN))
    got = jax.jit(twice)(enabled, carry, keys, scale)
    flat = lambda x: x.reshape((m * n,) + x.shape[2:])  # noqa: E731
    want = _reference(np.asarray(enabled).ravel(), jax.tree.map(flat, carry), flat(keys),
                      flat(scale))
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g).ravel(), np.asarray(w), rtol=1e-6)
    shapes = _loop_shapes(jax.make_jaxpr(twice)(enabled, carry, keys, scale).jaxpr)
    assert (16,) in shapes and (m, 16) not in shapes
