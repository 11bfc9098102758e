"""Expert iteration: search-improved training (SPEC §4.5). The network is the prior of a search
(``purejaxrl/search.py``, the env as its model); the search plays the self-play games and its
improved policy (Gumbel MuZero's: prior logits plus the completed Q-values, averaged over the
worlds) is the network's new target. Repeated, the network learns what the search finds, and
the next search starts from a better prior (Anthony et al. 2017; AlphaZero; Gumbel MuZero).

One iteration:
1. **Self-play.** ``num_envs`` lanes play ``num_steps`` moves each with the search teacher whose
   prior is the current network; episodes continue across iterations (auto-reset), like PPO's
   rollouts. Recorded per move: the observation and the search's policy target.
2. **Fit.** The targets of the last ``replay_iterations`` iterations, ``epochs`` passes of
   minibatches: cross-entropy from the target to the network's masked policy, Adam with
   gradient clipping. Only the policy is fitted: the search's leaf values come from the game
   (``search_hooks``), and greedy play reads only the logits, so the value head is left to
   drift with the shared torso (a run that goes back to PPO relearns it).

Nothing here knows the game: ``teacher_for(params)`` builds the search teacher (the env's
hooks) for the current parameters.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
import optax

from purejaxrl.networks import masked_logits, step_recurrent


@dataclasses.dataclass(frozen=True)
class ExpertIterationSettings:
    num_envs: int = 64  # self-play lanes: boards searched at once
    num_steps: int = 16  # moves per lane and iteration
    epochs: int = 4
    minibatch_size: int = 256
    lr: float = 1e-4
    max_grad_norm: float = 0.5
    replay_iterations: int = 4  # the targets of this many latest iterations are fitted

    def __post_init__(self):
        for name in ("num_envs", "num_steps", "epochs", "minibatch_size", "replay_iterations"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.minibatch_size > self.num_envs * self.num_steps:
            raise ValueError(f"minibatch_size {self.minibatch_size} is larger than one "
                             f"iteration's moves ({self.num_envs} x {self.num_steps})")
        if not self.lr > 0:
            raise ValueError(f"lr must be > 0, got {self.lr}")


def policy_loss(network, params, obs, target, mask, hidden=None,
                weight=None, axis_name=None, target_shift=None) -> tuple[jax.Array, dict]:
    """Mean cross-entropy H(target, policy) over a batch; also the KL divergence (the part of
    the loss the network can still remove) and the policy's entropy. A recurrent network
    steps once from ``hidden`` (f32[N, C], the memory held before ``obs``). With
    ``target_shift`` (f32[N, A], logits) the target is relative, not ``target``: the policy's
    own logits, held fixed, plus the shift, so the loss's gradient is the shift's pull alone
    (none where the shift is 0, whatever the policy has become). With ``weight``
    (f32[N]) the means are weighted (a batch that weighs nothing gives 0). Under
    ``axis_name`` (the batch split over devices, whose gradients and logged values are then
    averaged over them) each device returns its share of the weighted mean over the whole
    batch: a device's own weighted mean would count one labelled state as much as forty."""
    logits, _ = _heads(network, params, obs, hidden)
    log_policy = jax.nn.log_softmax(masked_logits(logits, mask))
    log_policy = jnp.where(mask, log_policy, 0.0)  # 0 * -1e9 is 0, but keep it exact
    if target_shift is not None:
        target = jax.nn.softmax(masked_logits(jax.lax.stop_gradient(logits) + target_shift,
                                              mask))
    cross_entropy = -jnp.sum(target * log_policy, axis=-1)
    target_entropy = -jnp.sum(jnp.where(target > 0, target * jnp.log(target), 0.0), axis=-1)
    policy_entropy = -jnp.sum(jnp.exp(log_policy) * log_policy, axis=-1)
    mean = _batch_mean(weight, axis_name)
    loss = mean(cross_entropy)
    return loss, {"loss": loss, "kl": mean(cross_entropy - target_entropy),
                  "policy_entropy": mean(policy_entropy),
                  "target_entropy": mean(target_entropy)}


def value_loss(network, params, obs, target, hidden=None, weight=None,
               axis_name=None) -> jax.Array:
    """Half the mean squared error of the critic against ``target`` (f32[N]: the search's
    values, in the critic's units), weighted and averaged over devices as ``policy_loss``."""
    _, value = _heads(network, params, obs, hidden)
    return _batch_mean(weight, axis_name)(0.5 * jnp.square(value - target))


def _heads(network, params, obs, hidden):
    """(logits, value) at ``obs``; a recurrent network steps once from ``hidden``."""
    if hidden is None:
        return network.apply(params, obs)
    _, logits, value = step_recurrent(network, params, hidden, obs,
                                      jnp.zeros(hidden.shape[0], jnp.bool_))
    return logits, value


def _batch_mean(weight, axis_name):
    """The mean over a batch, weighted by ``weight`` (f32[N]; None: plain). Under
    ``axis_name`` each device returns its share of the weighted mean over the whole batch,
    so that the devices' average is that mean (``policy_loss``)."""
    if weight is None:
        return jnp.mean
    weight = jax.lax.stop_gradient(weight)
    total_weight, devices = jnp.sum(weight), 1
    if axis_name is not None:
        total_weight = jax.lax.psum(total_weight, axis_name)
        devices = jax.lax.psum(1, axis_name)

    def mean(values):
        return devices * jnp.sum(weight * values) / jnp.maximum(total_weight, 1e-8)
    return mean


def make_optimizer(settings: ExpertIterationSettings) -> optax.GradientTransformation:
    return optax.chain(optax.clip_by_global_norm(settings.max_grad_norm),
                       optax.adam(settings.lr, eps=1e-5))


def make_self_play(env, env_params, teacher_for: Callable, num_steps: int) -> Callable:
    """``self_play(params, carry, key) -> (carry, moves)``: ``num_steps`` moves of every lane of
    ``carry = (obs, env_state)`` (leading axis: lanes), each chosen by the search teacher with
    the network ``params`` as prior. ``moves`` (leading axes: step, lane) holds ``obs``, the
    ``target`` and ``mask``, and per move the episode's ``done``, ``stage`` and ``won``.
    Jittable."""
    step = jax.vmap(env.step, in_axes=(0, 0, 0, None))

    def self_play(params, carry, key):
        teach = jax.vmap(teacher_for(params))

        def one_move(carry, key):
            obs, env_state = carry
            lanes = jax.tree.leaves(obs)[0].shape[0]
            teach_key, step_key = jax.random.split(key)
            actions, targets = teach(jax.random.split(teach_key, lanes), obs, env_state)
            next_obs, next_state, _, terminated, truncated, info = step(
                jax.random.split(step_key, lanes), env_state, actions, env_params)
            move = dict(obs=obs, target=targets, mask=env.action_mask(obs),
                        done=terminated | truncated, stage=info["stage"], won=info["won"])
            return (next_obs, next_state), move

        return jax.lax.scan(one_move, carry, jax.random.split(key, num_steps))

    return self_play


def make_fit_step(network, optimizer) -> Callable:
    """``fit_step(params, opt_state, batch) -> (params, opt_state, metrics)``: one gradient step
    on a minibatch (``obs``, ``target``, ``mask``). Jittable."""
    def fit_step(params, opt_state, batch):
        grads, metrics = jax.grad(
            lambda p: policy_loss(network, p, batch["obs"], batch["target"], batch["mask"]),
            has_aux=True)(params)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, metrics
    return fit_step


def flatten_moves(moves: dict) -> dict:
    """Host arrays of the fitted fields with (step, lane) merged into one axis."""
    fields = {name: moves[name] for name in ("obs", "target", "mask")}
    return jax.tree.map(lambda x: np.asarray(x).reshape((-1,) + x.shape[2:]),
                        jax.device_get(fields))


def minibatches(data: dict, size: int, epochs: int, rng: np.random.Generator):
    """``epochs`` shuffled passes over ``data`` (leading axis: samples) in minibatches of
    ``size`` (the remainder of each pass is dropped: one compiled shape)."""
    count = len(data["target"])
    for _ in range(epochs):
        order = rng.permutation(count)
        for start in range(0, count - size + 1, size):
            index = order[start:start + size]
            yield jax.tree.map(lambda x: x[index], data)


def self_play_summary(moves: dict) -> dict:
    """What the self-play games of an iteration show: episodes ended, their mean stage and
    win rate (nan where none ended)."""
    done = np.asarray(moves["done"])
    ended = int(done.sum())
    stage = np.asarray(moves["stage"])[done]
    won = np.asarray(moves["won"])[done]
    return {"episodes": ended,
            "episode_stage": float(stage.mean()) if ended else float("nan"),
            "episode_win_rate": float(won.mean()) if ended else float("nan")}
