"""Run rarely-needed work only on the lanes that need it, also under ``jax.vmap``.

Under vmap a per-env ``lax.cond`` becomes a select that computes both branches for every env,
so stage generation (needed only on the steps that complete a stage or reset a game) would be
paid by every env on every step. ``sparse_update`` is a ``custom_vmap`` whose batching rule
gathers the lanes that need the work into chunks, runs the work on those chunks only, and
scatters the results back: the cost follows the number of lanes that need it, not the batch
size. ``ragged_loop`` does the same for a loop whose trip count varies by lane (the enemies of
a step, the transmissions of a spawn): the lanes loop in blocks of similar counts instead of
all to the longest. Results are identical to the per-lane semantics (tested).

Under two vmaps (the search's boards x worlds, ``--num-seeds``'s seeds x envs) the outer vmap
would batch the inner rule's chunk loop as it is, so every lane of the whole batch would run
the work whenever any of them needs it. The batched forms are therefore ``_one_batch_axis``
functions: a further vmap folds its axis into the batch they already have, so the chunks are
cut from every lane of every level at once.
"""

import functools
from typing import Callable

import jax
import jax.numpy as jnp
from jax.custom_batching import custom_vmap

from . import loop_width


def tree_where(flag, new, old):
    """``new`` where ``flag`` else ``old``, leaf by leaf (a per-lane select under vmap)."""
    return jax.tree.map(lambda a, b: jnp.where(flag, a, b), new, old)


def _broadcast_unbatched(axis_size: int, tree, flags):
    """Give every leaf the batch axis: a leaf the vmap left unbatched is broadcast."""
    return jax.tree.map(
        lambda x, b: x if b else jnp.broadcast_to(x, (axis_size,) + jnp.shape(x)), tree, flags)


def _batching_rule(batched: Callable) -> Callable:
    """The ``custom_vmap`` rule that gives every argument the batch axis and runs ``batched``
    (a ``_one_batch_axis`` function) on them: every result is batched."""
    def rule(axis_size, in_batched, *args):
        args = tuple(_broadcast_unbatched(axis_size, a, b) for a, b in zip(args, in_batched))
        out = batched(*args)
        return out, jax.tree.map(lambda _: True, out)
    return rule


def _one_batch_axis(batched: Callable) -> Callable:
    """``batched(*trees)`` (every leaf with one leading batch axis, the same for all) as a
    function that, vmapped again, folds the new axis into that one: [m, n, ...] leaves become
    [m * n, ...], ``batched`` runs once on them, and its results are unfolded back."""

    @custom_vmap
    def run(*trees):
        return batched(*trees)

    @run.def_vmap
    def run_folded(axis_size, in_batched, *trees):
        trees = tuple(_broadcast_unbatched(axis_size, t, b) for t, b in zip(trees, in_batched))
        fold = lambda x: x.reshape((-1,) + x.shape[2:])  # noqa: E731
        out = run(*jax.tree.map(fold, trees))
        out = jax.tree.map(lambda x: x.reshape((axis_size, -1) + x.shape[1:]), out)
        return out, jax.tree.map(lambda _: True, out)

    return run


def _chunk_size(axis_size: int) -> int:
    # Big enough that a typical step needs one chunk, small enough to skip most lanes.
    return max(1, min(axis_size, max(16, axis_size // 32)))


def sparse_update(work: Callable) -> Callable:
    """Turn ``work(carry, *args) -> carry`` into ``run(enabled, carry, *args) -> carry``, equal
    to ``work(carry, *args)`` where ``enabled`` and to ``carry`` elsewhere."""

    @custom_vmap
    def run(enabled, carry, *args):
        return jax.lax.cond(enabled, lambda: work(carry, *args), lambda: carry)

    @_one_batch_axis
    def chunked(enabled, carry, *args):
        axis_size = enabled.shape[0]
        chunk = _chunk_size(axis_size)
        batched_work = jax.vmap(work)

        def cond(state):
            remaining, _ = state
            return jnp.any(remaining)

        def body(state):
            remaining, carry = state
            lanes = jnp.nonzero(remaining, size=chunk, fill_value=axis_size)[0]
            safe = jnp.minimum(lanes, axis_size - 1)
            take = lambda tree: jax.tree.map(lambda x: x[safe], tree)  # noqa: E731
            done = batched_work(take(carry), *[take(a) for a in args])
            carry = jax.tree.map(lambda c, d: c.at[lanes].set(d, mode="drop"), carry, done)
            return remaining.at[lanes].set(False, mode="drop"), carry

        _, carry = jax.lax.while_loop(cond, body, (enabled, carry))
        return carry

    run.def_vmap(_batching_rule(chunked))
    return run


def _block_size(axis_size: int) -> int:
    return min(axis_size, max(16, loop_width.RAGGED_MIN_BLOCK(), -(-axis_size // 32)))


def _loop(body, trips, carry, consts):
    def step(state):
        k, carry = state
        return k + 1, body(k, carry, consts)

    _, carry = jax.lax.while_loop(lambda state: state[0] < trips, step, (jnp.int32(0), carry))
    return carry


def ragged_loop(body: Callable) -> Callable:
    """Turn ``body(k, carry, consts) -> carry`` into ``run(trips, carry, consts) -> carry``,
    the carry after ``body`` for k = 0 .. trips - 1.

    A batched loop runs until its longest lane is done and computes every lane on every
    iteration, so a batch where one env has 17 enemies and the mean has 1.3 pays 17 iterations
    for every env. Under vmap this sorts the lanes by trip count and cuts them into blocks
    (``_block_size``) that each loop only as long as their own longest lane: the cost follows
    the sum of the trips, not the batch size times the longest. Results are the per-lane
    semantics exactly (tested)."""

    @custom_vmap
    def run(trips, carry, consts):
        return _loop(body, trips, carry, consts)

    @_one_batch_axis
    def blocked(trips, carry, consts):
        axis_size = trips.shape[0]
        per_lane = jax.vmap(functools.partial(_loop, body))
        block = _block_size(axis_size)
        if block >= axis_size:
            return per_lane(trips, carry, consts)
        n_blocks = -(-axis_size // block)
        padding = n_blocks * block - axis_size
        order = jnp.argsort(-trips)  # longest first: the last blocks loop least
        lanes = jnp.concatenate([order, jnp.zeros(padding, order.dtype)])
        block_trips = jnp.concatenate([trips[order], jnp.zeros(padding, trips.dtype)])

        def blocks(tree):
            return jax.tree.map(lambda x: x[lanes].reshape((n_blocks, block) + x.shape[1:]), tree)

        def one_block(_, inputs):
            return None, per_lane(*inputs)

        _, done = jax.lax.scan(one_block, None,
                               (block_trips.reshape(n_blocks, block), blocks(carry),
                                blocks(consts)))
        back = jnp.argsort(order)
        return jax.tree.map(lambda x: x.reshape((n_blocks * block,) + x.shape[2:])[back], done)

    run.def_vmap(_batching_rule(blocked))
    return run
