"""The distillation teacher's labels kept across updates (``--distill-replay N``).

Why: a search label costs hundreds of model steps, so an update labels a few hundred states,
and fitted alone they spread over 128 minibatches: 4 labelled states beside 2,048 PPO samples
in each, whose fit never converges (the KL from the targets to the policy stayed flat in every
run of SPEC §4.5). A frozen teacher's label never goes stale (the teacher does not change), so
the labels can be kept and fitted again, as AlphaZero keeps its recent games: every update
writes its fresh labels into a ring of ``N`` slots and the fit draws every minibatch's share
from the whole ring, so once it has filled each minibatch holds ``N / num_minibatches``
labelled states and each label is fitted for ``N / labels per update`` updates.

A label is what the teacher gave at one state: the observation (in the env's compact form, as
the rollout stores it), the action mask, the target (f32[A]: the improved policy, or the best
move one-hot), its weight (1, or ``distill_where`` "acquire"'s: only where a program is in
reach) and, for a recurrent network, the fitted network's memory before that observation at
labelling time (the fit steps the core once from it, as the fresh labels do; the stored memory
is the one the network of that update produced, as PPO's later epochs and self-imitation
replay theirs). An empty slot weighs 0. Where the move target weighs only where the teacher
overrules the network, that is decided at every fit by the network of that update
(``ppo.weigh_overrules``), not once when the label is made: a move the network has since
adopted stops weighing, and one it has since drifted from weighs again.
"""

from __future__ import annotations

from flax import struct
import jax
import jax.numpy as jnp


@struct.dataclass
class LabelReplay:
    """One device's ring of ``K`` labels: ``labels`` a dict of ``obs`` (the observation pytree),
    ``target`` f32[K, A], ``mask`` bool[K, A], ``weight`` f32[K], with a recurrent core
    ``hidden`` f32[K, C], and with the search's values ``value`` and ``value_weight`` f32[K];
    ``filled`` bool[K]."""

    labels: dict
    filled: jax.Array


def empty_replay(obs, mask, hidden, capacity: int, with_values: bool = False) -> LabelReplay:
    """An empty ring of ``capacity`` labels shaped after the envs' compact observation ``obs``
    (leading axis N), their action mask and the recurrent memory (f32[N, C], or None);
    ``with_values`` (``--distill-value-coef``) also keeps the search's ``value`` f32[K] and
    its ``value_weight`` f32[K]."""
    def blank(x):
        return jnp.zeros((capacity,) + x.shape[1:], x.dtype)
    labels = dict(obs=jax.tree.map(blank, obs), mask=blank(mask),
                  target=jnp.zeros((capacity, mask.shape[-1]), jnp.float32),
                  weight=jnp.zeros(capacity, jnp.float32))
    if with_values:
        labels.update(value=jnp.zeros(capacity, jnp.float32),
                      value_weight=jnp.zeros(capacity, jnp.float32))
    if hidden is not None:
        labels["hidden"] = blank(hidden)
    return LabelReplay(labels=labels, filled=jnp.zeros(capacity, bool))


def store(replay: LabelReplay, fresh: dict, update_step) -> LabelReplay:
    """Write one update's labels (the teacher's dict: ``obs``, ``target``, ``mask``, optionally
    ``weight`` and ``hidden``; leading axis n <= K) into the ring, the oldest out first: update
    u writes slots ``(u * n + i) % K``."""
    count = fresh["target"].shape[0]
    capacity = replay.filled.shape[0]
    slots = ((update_step % capacity) * count + jnp.arange(count)) % capacity  # no overflow
    fresh = dict(fresh, weight=fresh.get("weight", jnp.ones(count, jnp.float32)))
    labels = {name: jax.tree.map(lambda kept, new: kept.at[slots].set(new),
                                 replay.labels[name], fresh[name])
              for name in replay.labels}
    return LabelReplay(labels=labels, filled=replay.filled.at[slots].set(True))


def fitted_labels(replay: LabelReplay) -> dict:
    """The whole ring as the fit's labels (``update_epochs``' ``distill``): every slot, an
    empty one weighing 0."""
    filled = replay.filled.astype(jnp.float32)
    fitted = dict(replay.labels, weight=replay.labels["weight"] * filled)
    if "value_weight" in fitted:
        fitted["value_weight"] = fitted["value_weight"] * filled
    return fitted
