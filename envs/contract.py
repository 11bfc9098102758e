"""What an environment gives the trainer (``purejaxrl/``), and the one check that it does, in the
spirit of ``pgx.api_test``: shipped with the environments, run in the tests on every kind of env
the trainer is used with (HackMatrix, the toy corridor, gymnax's CartPole-v1 and a MinAtar env).

Required: a gymnax 1.0 ``Environment``

* ``reset(key, params) -> (obs, state)``; ``obs`` is an array or a pytree of arrays;
* ``step(key, state, action, params) -> (obs, state, reward, terminated, truncated, info)``,
  auto-resetting, with a float32 reward, bool flags and ``info["final_observation"]`` (the
  observation the step ended on, before a reset replaced it); a step may be both terminated
  and truncated (terminated wins: nothing is bootstrapped);
* ``default_params`` with ``max_steps_in_episode``; ``observation_space(params)`` (a ``Box``
  of the observation's shape and dtype, or a ``Dict`` of them named like its fields);
  ``action_space(params)`` a ``Discrete``.

Optional hooks: the trainer reads each through ``purejaxrl/env_protocol.py`` with a default
where an env lacks it, so a plain gymnax env trains unchanged.

| hook | meaning | default |
|---|---|---|
| ``action_mask(obs) -> bool[A]`` | the legal actions (never empty) | all legal |
| ``reward_components`` + ``info["reward_breakdown"]`` | names of the reward's parts, and their values, summing to the reward (logged as ``reward/<name>``) | none |
| ``training_rewards`` | ``{name: fn(reward, breakdown) -> reward}``: what PPO may optimise instead of the reward ("env", the reward itself, is always offered) | "env" only |
| ``training_options`` | ``EnvOption``s (``envs/options.py``): the constructor options a training run may set, each with the trainer's default, its role for a trained policy (game, training or agent) and its help; the trainer's ``--`` flags, ``TrainConfig.env_options`` and ``envs.registry.make`` follow them (``envs.registry.OWN_ENV_OPTIONS`` names them for reading without JAX) | none |
| ``params.shaping_gamma`` | a discount the env's reward shaping uses: set to the agent's | not set |
| ``metrics`` | ``Metric``s: named statistics of episodes, logged in training and reported by evaluation | none |
| ``num_stages`` + ``info["stage"]`` (i32, stage after the step, from 1) and ``info["stage_complete"]`` (bool) | progress through stages: the stage histogram, the per-stage evaluation report, the start-state curriculum | no stages |
| ``health_metrics(totals) -> {key: value}`` | host-side records derived from a chunk's totals (``HEALTH_TOTALS``) | none |
| ``heuristic_policy(key, obs, state) -> action`` | a scripted baseline that evaluation plays beside the network | none |
| ``episode_resources(state) -> {name: scalar}`` | what the player holds; evaluation reports it where games end | none |
| ``compact_observation(obs)`` and ``expand_observation(stored) -> obs`` | the observation as a rollout stores it (smaller dtypes), and back bit for bit | stored as it is |
| ``flat_observation(obs) -> f32[D]`` | the observation as one vector (the ``flat`` encoder) | every leaf flattened, concatenated |
| ``board_view(obs) -> BoardView`` | a board around a player (the ``egocentric`` encoder) | none: no egocentric encoder |
| ``version`` | the env's contract version; a checkpoint of another version is refused | none |
| ``search_hooks`` | the search's model, worlds, leaf values and the stage a state is on (``purejaxrl/search.py``, evaluate.py's search rows): ``DEFAULT_GAMMA`` and ``make_hooks(env, *, fair, gamma)``, the hooks of a search that discounts by ``gamma`` (its model's shaping pays at it) | no search rows |
| ``exploration_target(obs) -> (bool, i32)`` | whether the state offers an action a policy rarely tries but should see taken, and that action (always legal where offered): ``--explore-share`` takes it in a share of such states | the share is refused |
| ``action_groups`` | ``((name, (action, ...)), ...)``: a partition of the actions into kinds (the group-entropy bonus, ``--group-entropy-coef``) | no groups: the bonus is refused |

Hooks that take an observation or a state are written for one env (not batched); the trainer
vmaps them. ``check_env_contract`` checks the required API and every hook an env has.
"""  # noqa: E501 (the hook table's rows cannot be wrapped)

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from gymnax.environments import spaces

from envs.options import EnvOption

# The keys of the totals ``health_metrics`` receives besides each metric's name (its total) and
# "breakdown" ({component: total over the finished episodes}).
HEALTH_TOTALS = ("episodes", "return_sum", "length_sum", "stage_hist")
# How a metric's training total becomes a logged value: per finished episode, per env step,
# or the total itself.
LOG_PER = ("episode", "step", "total")
# Metric names with a meaning for evaluation's end causes (how a game ended).
END_CAUSE_METRICS = ("won", "died", "invalid")


class Metric(NamedTuple):
    """A named statistic of an env's episodes, computed on every step from the observation the
    action was chosen from, the action and the step's info (one env, not batched).

    ``at_end``: an outcome, the value on the step that ends an episode (training counts it at
    the end of whole episodes only); otherwise a count, summed over the episode's steps.
    ``log``: the training record key (None: not logged), its total divided as ``log_per``
    says (``LOG_PER``); ``alert``: a console warning shown with the total when it is not 0.
    ``summary``: evaluation's key, the mean per episode, or with ``summary_total`` the total
    over episodes; ``per_stage``: the per-stage report counts it in every stage (needs
    stages); ``column``: the summary's header in evaluation's text table (None: in its JSON
    only). ``name`` is the per-episode result's name in evaluation; ``END_CAUSE_METRICS``
    there say how games ended."""

    name: str
    value: Callable[[Any, jax.Array, dict], jax.Array]
    at_end: bool = False
    log: str | None = None
    log_per: str = "episode"
    alert: str | None = None
    summary: str | None = None
    summary_total: bool = False
    per_stage: bool = False
    column: str | None = None


class BoardView(NamedTuple):
    """An observation seen as a board around a player (one env): ``grid`` f32[H, W, F] per-cell
    features, the player's ``row`` and ``col`` (i32), and ``features``, the arrays (each
    [..., k]) that sit beside the re-centred board in the egocentric encoder."""

    grid: jax.Array
    row: jax.Array
    col: jax.Array
    features: tuple


def num_actions(env, params) -> int:
    space = env.action_space(params)
    assert isinstance(space, spaces.Discrete), f"the action space {space} is not Discrete"
    return int(space.n)


def _mask(env, obs, actions: int) -> jax.Array:
    if hasattr(env, "action_mask"):
        return env.action_mask(obs)
    return jnp.ones(actions, bool)


def _check_observation(obs, space, where: str) -> None:
    if isinstance(space, spaces.Dict):
        for name, box in space.spaces.items():
            leaf = getattr(obs, name) if not isinstance(obs, dict) else obs[name]
            assert leaf.shape == box.shape, f"{where}: {name} shape {leaf.shape} != {box.shape}"
            assert leaf.dtype == box.dtype, f"{where}: {name} dtype {leaf.dtype} != {box.dtype}"
        assert len(jax.tree.leaves(obs)) == len(space.spaces), (
            f"{where}: the observation has fields the space does not declare")
    else:
        assert obs.shape == space.shape, f"{where}: shape {obs.shape} != {space.shape}"
        assert obs.dtype == space.dtype, f"{where}: dtype {obs.dtype} != {space.dtype}"


def _check_storage(env, obs) -> None:
    """``expand_observation(compact_observation(obs))`` is ``obs`` bit for bit, with its
    shapes and dtypes, and the stored form is no larger."""
    stored = env.compact_observation(obs)
    back = env.expand_observation(stored)
    size = sum(leaf.size * leaf.dtype.itemsize for leaf in jax.tree.leaves(obs))
    stored_size = sum(leaf.size * leaf.dtype.itemsize for leaf in jax.tree.leaves(stored))
    assert stored_size <= size, f"compact_observation: {stored_size} bytes, more than {size}"
    assert jax.tree.structure(back) == jax.tree.structure(obs), "expand_observation: structure"
    for leaf, restored in zip(jax.tree.leaves(obs), jax.tree.leaves(back)):
        assert restored.shape == leaf.shape and restored.dtype == leaf.dtype, (
            "expand_observation", restored.shape, restored.dtype, leaf.shape, leaf.dtype)
        assert np.asarray(restored).tobytes() == np.asarray(leaf).tobytes(), (
            "expand_observation(compact_observation(obs)) is not obs bit for bit")


def _check_hooks(env, params, obs, state, actions: int) -> None:
    """The hooks that need no rollout: their types and shapes on one observation."""
    mask = jax.eval_shape(lambda o: _mask(env, o, actions), obs)
    assert mask.shape == (actions,) and mask.dtype == jnp.bool_, (
        f"action_mask: {mask.shape} {mask.dtype}, want ({actions},) bool")
    assert hasattr(env, "compact_observation") == hasattr(env, "expand_observation"), (
        "compact_observation and expand_observation come together")
    if hasattr(env, "compact_observation"):
        _check_storage(env, obs)
    if hasattr(env, "flat_observation"):
        flat = jax.eval_shape(env.flat_observation, obs)
        assert flat.ndim == 1 and flat.dtype == jnp.float32, ("flat_observation", flat)
    if hasattr(env, "board_view"):
        view = jax.eval_shape(env.board_view, obs)
        assert isinstance(view, BoardView), "board_view must return a BoardView"
        assert view.grid.ndim == 3, f"board_view grid {view.grid.shape}: want [H, W, F]"
        assert view.row.shape == view.col.shape == () and view.row.dtype == jnp.int32
        assert all(f.ndim == 1 for f in view.features), "board_view features: want [k] each"
    if hasattr(env, "heuristic_policy"):
        action = jax.eval_shape(env.heuristic_policy, jax.random.PRNGKey(0), obs, state)
        assert action.shape == () and jnp.issubdtype(action.dtype, jnp.integer), (
            "heuristic_policy", action)
    if hasattr(env, "episode_resources"):
        resources = jax.eval_shape(env.episode_resources, state)
        assert all(value.shape == () for value in resources.values()), resources
    for name in getattr(env, "training_rewards", {}):
        assert name != "env", "training reward 'env' is the env's reward; do not redefine it"
    for option in getattr(env, "training_options", ()):
        assert isinstance(option, EnvOption), f"training option {option!r}: want an EnvOption"
        assert hasattr(env, option.name), f"training option {option.name!r} is not an env attribute"
    for metric in getattr(env, "metrics", ()):
        assert metric.log_per in LOG_PER, (metric.name, metric.log_per)
        assert not metric.per_stage or hasattr(env, "num_stages"), (
            f"metric {metric.name!r} is per stage but the env has no stages")
        assert metric.column is None or metric.summary is not None, (
            f"metric {metric.name!r} has a table column but no summary to show in it")
    names = [metric.name for metric in getattr(env, "metrics", ())]
    assert len(set(names)) == len(names), f"metric names repeat: {names}"
    if hasattr(env, "action_groups"):
        check_action_groups(env.action_groups, actions)


def _explored_legality(env, obs, mask):
    """(offered, legal) per env of a batch: whether ``exploration_target`` offers its action,
    and whether ``mask`` (the batch's action masks) allows that action."""
    offered, target = jax.vmap(env.exploration_target)(obs)
    return offered, jnp.take_along_axis(mask, target[:, None], axis=1)[:, 0]


def check_action_groups(groups, actions: int) -> None:
    """``groups`` names kinds of action that partition ``range(actions)``: every action in
    exactly one group, no group empty, no name twice (the group marginals then sum to 1)."""
    names = [name for name, _ in groups]
    assert len(set(names)) == len(names), f"action group names repeat: {names}"
    assert all(len(members) > 0 for _, members in groups), f"an action group is empty: {groups}"
    listed = sorted(a for _, members in groups for a in members)
    assert listed == list(range(actions)), (
        f"action_groups must list every action 0..{actions - 1} exactly once, got {listed}")


def check_env_contract(env, params, *, num_envs: int = 4, num_steps: int = 32,
                       seed: int = 0) -> None:
    """Assert that ``env`` meets the contract of this module: observations match the declared
    space with a non-empty mask; ``step`` returns the 6-tuple with a float32 reward and bool
    flags; jit and vmap of random legal play over ``num_steps`` trace ``step`` once; an
    episode ends within them (cap ``params.max_steps_in_episode`` to make sure), and is
    followed by a reset observation while ``final_observation`` keeps the ended one; and every
    hook the env has works: the reward breakdown is named by ``reward_components`` and sums to
    the reward, training rewards and metrics give a value per env step, the stage keys are
    there with stages, the hooks of ``_check_hooks`` have their shapes."""
    actions = num_actions(env, params)
    space = env.observation_space(params)
    obs, state = jax.jit(env.reset)(jax.random.PRNGKey(seed), params)
    _check_observation(obs, space, "reset")
    _check_hooks(env, params, obs, state, actions)
    assert bool(jnp.any(_mask(env, obs, actions))), "reset: empty action mask"

    traces = []

    def step(key, state, action):
        traces.append(None)  # runs once per trace
        return env.step(key, state, action, params)

    def play(key, obs, state):
        def one(carry, key):
            obs, state = carry
            act_key, step_key = jax.random.split(key)
            mask = jax.vmap(lambda o: _mask(env, o, actions))(obs)
            action = jax.vmap(jax.random.categorical)(jax.random.split(act_key, num_envs),
                                                       jnp.where(mask, 0.0, -jnp.inf))
            out = jax.vmap(step)(jax.random.split(step_key, num_envs), state, action)
            legal = jnp.take_along_axis(mask, action[:, None], axis=1)[:, 0]
            info = out[5]
            derived = {
                # (offered, whether the offered action is legal) per env
                "exploration": (_explored_legality(env, obs, mask)
                                if hasattr(env, "exploration_target") else None),
                "metrics": {m.name: jax.vmap(m.value)(obs, action, info)
                            for m in getattr(env, "metrics", ())},
                "training": {name: jax.vmap(fn)(out[2], info["reward_breakdown"])
                             for name, fn in getattr(env, "training_rewards", {}).items()},
                "next_mask": jax.vmap(lambda o: _mask(env, o, actions))(out[0]),
            }
            return (out[0], out[1]), (out, obs, legal, derived)
        return jax.lax.scan(one, (obs, state), jax.random.split(key, num_steps))[1]

    keys = jax.random.split(jax.random.PRNGKey(seed + 1), num_envs)
    obs, state = jax.vmap(env.reset, in_axes=(0, None))(keys, params)
    (next_obs, _, reward, terminated, truncated, info), before, legal, derived = jax.device_get(
        jax.jit(play)(jax.random.PRNGKey(seed + 2), obs, state))
    assert len(traces) == 1, f"step was traced {len(traces)} times"
    assert bool(np.all(legal)), "random legal play chose a masked action"
    if derived["exploration"] is not None:
        offered, target_legal = derived["exploration"]
        assert offered.dtype == np.bool_ and offered.shape == (num_steps, num_envs), offered
        assert np.all(target_legal | ~offered), "exploration_target offered a masked action"
    assert bool(np.all(np.any(derived["next_mask"], axis=-1))), "a step left an empty mask"
    batch = (num_steps, num_envs)
    assert reward.shape == batch and reward.dtype == np.float32, (reward.shape, reward.dtype)
    for flag in (terminated, truncated):
        assert flag.shape == batch and flag.dtype == np.bool_, (flag.shape, flag.dtype)
    if hasattr(env, "reward_components"):
        breakdown = info["reward_breakdown"]
        assert set(breakdown) == set(env.reward_components), tuple(breakdown)
        for name in env.reward_components:
            assert breakdown[name].shape == batch and breakdown[name].dtype == np.float32, name
        np.testing.assert_allclose(sum(breakdown[n] for n in env.reward_components), reward,
                                   rtol=1e-5, atol=1e-5)
    for name, value in {**derived["metrics"], **derived["training"]}.items():
        assert value.shape == batch, f"{name}: {value.shape}, want one value per env step"
    if hasattr(env, "num_stages"):
        assert info["stage"].dtype == np.int32 and info["stage"].shape == batch, "info stage"
        assert info["stage_complete"].dtype == np.bool_, "info stage_complete"
        assert np.all((info["stage"] >= 1) & (info["stage"] <= env.num_stages)), (
            "info stage outside 1..num_stages")
    for t in range(num_steps):
        _check_observation(jax.tree.map(lambda x: x[t, 0], next_obs), space, f"step {t}")
    done = terminated | truncated
    assert np.any(done), f"no episode ended in {num_steps} steps of random play"
    final = info["final_observation"]
    assert jax.tree.structure(final) == jax.tree.structure(next_obs)
    # XLA may compute the two copies of a float observation in differently fused kernels,
    # which can round differently in the last bit: compared to 1e-6.
    same = np.all(np.stack([np.all(np.isclose(x, y, rtol=1e-6, atol=1e-6),
                                   axis=tuple(range(2, x.ndim)))
                            for x, y in zip(jax.tree.leaves(final), jax.tree.leaves(next_obs))]),
                  axis=0)
    # Where the episode goes on, final_observation is the next observation (where it ended,
    # the ended episode's last one: the step's observation before the reset replaced it).
    assert np.all(same[~done]), "final_observation differs from the observation mid-episode"
    # The observation an action was chosen from is the previous step's next observation.
    for t in range(1, num_steps):
        assert all(np.array_equal(a[t], b[t - 1]) for a, b in
                   zip(jax.tree.leaves(before), jax.tree.leaves(next_obs)))
