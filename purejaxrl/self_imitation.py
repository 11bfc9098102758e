"""Self-imitation (Oh et al., "Self-Imitation Learning", ICML 2018): replay the agent's own
best moments and imitate the actions whose outcome beat what the critic expected.

Why here: PPO reinforces an action in proportion to how often it is sampled, and its clip lets
an update raise an action's probability by at most ``1 + clip_eps``. A decision that pays off
rarely (a stage cleared against the odds, a program acquired that later saves the game, the
one game in a thousand that wins) is seen once, in one rollout, and is then diluted among
262,144 other samples. The replay keeps such moments for several updates and pushes the policy
towards them with an unclipped term that vanishes as soon as the critic has caught up.

What is kept: after each rollout's advantages, its ``windows_per_update`` items with the largest
positive advantage mass (sum over the item's steps of ``max(target - value, 0)``, the
lambda-return against the value the rollout saw) are written into a ring of ``windows`` slots,
one block of slots per update, so every item stays for ``windows / windows_per_update`` updates
and then makes room (a priority buffer would keep the luckiest outcomes forever; the env is
stochastic, and a lucky return never stops beating the critic). An item is one step for a
feed-forward network and one BPTT window (``sequence_length`` steps, with the hidden state it
started from) for a recurrent one, so the loss replays the core as the rollout ran it.

The loss, on an equal share of the replay in every minibatch:
``-log pi(a|s) * max(R - V(s), 0) + SIL_VALUE_WEIGHT * 0.5 * max(R - V(s), 0) ** 2``, with V the
current critic: an action is imitated only while its outcome still beats the critic's estimate.
``R`` is the lambda-return of the update that stored it, in the critic's units of that update.
A stored window's hidden state is the one the rollout's network produced, as for PPO's own
windows in later epochs.
"""

from __future__ import annotations

from typing import Any

from flax import struct
import jax
from jax import lax
import jax.numpy as jnp

from purejaxrl.networks import log_prob_of

# The value term's weight (Oh et al.'s beta).
SIL_VALUE_WEIGHT = 0.01


@struct.dataclass
class ReplayWindows:
    """One device's replay, item-major: ``transitions`` and ``targets`` [K, L, ...] (L = 1 for
    a feed-forward network), ``hidden`` [K, C] (None without a core), ``filled`` bool[K]."""

    transitions: Any
    targets: jax.Array
    hidden: jax.Array | None
    filled: jax.Array


def empty_replay(transition_example, hidden_example, windows: int,
                 length: int) -> ReplayWindows:
    """An empty replay of ``windows`` items of ``length`` steps, shaped after one step's
    ``Transition`` (leading axis N) and the per-env hidden state (f32[N, C] or None)."""
    blank = lambda x: jnp.zeros((windows, length) + x.shape[1:], x.dtype)  # noqa: E731
    hidden = (None if hidden_example is None
              else jnp.zeros((windows,) + hidden_example.shape[1:], hidden_example.dtype))
    return ReplayWindows(transitions=jax.tree.map(blank, transition_example),
                         targets=jnp.zeros((windows, length), jnp.float32), hidden=hidden,
                         filled=jnp.zeros(windows, bool))


def item_length(targets, window_hidden) -> int:
    """The steps of one item: a BPTT window, or one step without a core."""
    return 1 if window_hidden is None else targets.shape[0] // window_hidden.shape[0]


def gather_items(transitions, targets, window_hidden, items):
    """Items ``items`` (i32[B]) of the rollout, item-major: ([B, L] transitions, [B, L]
    targets, [B, C] hidden or None), gathered straight from the [T, N] arrays (no copy of the
    whole rollout). Item ``w * N + n`` is env n's window w (a recurrent core with W windows of
    L = T / W steps: ``window_hidden`` f32[W, N, C]); without a core, item ``t * N + n`` is
    step t of env n (L = 1)."""
    envs, length = targets.shape[1], item_length(targets, window_hidden)
    window, env = items // envs, items % envs
    rows = window[:, None] * length + jnp.arange(length)[None, :]  # [B, L] steps

    def pick(x):
        return x[rows, env[:, None]]
    hidden = None if window_hidden is None else window_hidden[window, env]
    return jax.tree.map(pick, transitions), pick(targets), hidden


def rollout_items(transitions, targets, window_hidden):
    """Every item of the rollout, in item order (``gather_items``)."""
    steps, envs = targets.shape[:2]
    return gather_items(transitions, targets, window_hidden,
                        jnp.arange(steps * envs // item_length(targets, window_hidden)))


def store(replay: ReplayWindows, transitions, targets, window_hidden, update_step,
          windows_per_update: int) -> ReplayWindows:
    """Write this rollout's ``windows_per_update`` items with the most positive advantage
    (``targets - transitions.value``) into the ring block of ``update_step``."""
    steps, envs = targets.shape[:2]
    length = item_length(targets, window_hidden)
    gap = jnp.maximum(targets - transitions.value, 0.0)  # [T, N]
    gain = jnp.sum(gap.reshape(steps // length, length, envs), axis=1).reshape(-1)
    _, best = lax.top_k(gain, windows_per_update)
    items, item_targets, item_hidden = gather_items(transitions, targets, window_hidden, best)
    blocks = replay.filled.shape[0] // windows_per_update
    start = (update_step % blocks) * windows_per_update

    def write(buffer, new):
        return lax.dynamic_update_slice_in_dim(buffer, new, start, axis=0)
    return ReplayWindows(
        transitions=jax.tree.map(write, replay.transitions, items),
        targets=write(replay.targets, item_targets),
        hidden=None if item_hidden is None else write(replay.hidden, item_hidden),
        filled=lax.dynamic_update_slice_in_dim(
            replay.filled, jnp.ones(windows_per_update, bool), start, axis=0))


def minibatch_shares(replay: ReplayWindows, key, minibatches: int) -> ReplayWindows:
    """The replay shuffled and cut into ``minibatches`` equal shares (leading axis M)."""
    order = jax.random.permutation(key, replay.filled.shape[0])
    return jax.tree.map(lambda x: x[order].reshape((minibatches, -1) + x.shape[1:]), replay)


def self_imitation_loss(network, params, share: ReplayWindows):
    """(loss, metrics) of one share of the replay (module docstring). Metrics: ``sil_loss``
    (the policy term) and ``sil_positive`` (the share of its filled steps whose return still
    beats the critic)."""
    batch = jax.tree.map(lambda x: jnp.swapaxes(x, 0, 1), share.transitions)  # [L, n, ...]
    obs = network.env.expand_observation(batch.obs)
    if share.hidden is None:
        logits, value = network.apply(params, jax.tree.map(lambda x: x[0], obs))
        logits, value = logits[None], value[None]
    else:
        _, logits, value = network.apply(params, share.hidden, obs, batch.episode_start)
    targets = jnp.swapaxes(share.targets, 0, 1)
    weight = jnp.broadcast_to(share.filled[None, :], targets.shape).astype(jnp.float32)
    count = jnp.maximum(jnp.sum(weight), 1.0)
    gap = jnp.maximum(targets - value, 0.0)
    log_prob = log_prob_of(logits, batch.mask, batch.action)
    policy_term = -jnp.sum(weight * log_prob * lax.stop_gradient(gap)) / count
    value_term = 0.5 * jnp.sum(weight * jnp.square(gap)) / count
    positive = jnp.sum(weight * (gap > 0)) / count
    return (policy_term + SIL_VALUE_WEIGHT * value_term,
            {"sil_loss": policy_term, "sil_positive": positive})
