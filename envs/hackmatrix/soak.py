"""A vmapped random-valid-action soak that checks invariants on every step. Used by the test
suite (small) and scripts/soak.py (10^6+ steps)."""

import jax
import jax.numpy as jnp
import numpy as np

from .core.constants import BLOCK, N_ACTIONS, REDUC, PROGRAM_ACTION_OFFSET
from .env import HackMatrix


def _obs_out_of_range(obs):
    """Count values outside the documented ranges (§9.2 and errata O6: only player[6] and
    player[7] may exceed 1 in generated play)."""
    player = obs.player
    bad_player = jnp.sum((player < 0)
                         | ((player > 1) & ~jnp.isin(jnp.arange(10), jnp.array([6, 7]))))
    bad_grid = jnp.sum((obs.grid < 0) | (obs.grid > 1))
    bad_programs = jnp.sum((obs.programs < 0) | (obs.programs > 1))
    return bad_player + bad_grid + bad_programs


def _data_invariant_violations(state):
    g = state.grid
    data_block = (g.content == BLOCK) & (g.program < 0) & ~g.siphoned
    return jnp.sum(data_block & (g.points != g.spawn))


def _off_board(state):
    def off(active, row, col):
        return jnp.sum(active & ((row < 0) | (row > 5) | (col < 0) | (col > 5)))
    e, t = state.enemies, state.transmissions
    return off(e.active, e.row, e.col) + off(t.active, t.row, t.col)


def make_soak(env: HackMatrix, params, num_envs: int, num_steps: int):
    vstep = jax.vmap(env.step, in_axes=(0, 0, 0, None))

    def soak(key):
        obs, state = jax.vmap(env.reset, in_axes=(0, None))(jax.random.split(key, num_envs), params)
        reduc_used = jnp.zeros(num_envs, bool)
        zero = jnp.int32(0)
        stats = dict(invalid_actions=zero, hp_out_of_range=zero, max_overflow=zero, non_finite=zero,
                     max_breakdown_error=jnp.float32(0), obs_out_of_range=zero,
                     data_invariant_violations=zero, off_board_entities=zero, episodes=zero,
                     stage_completions=zero, wins=zero, deaths=zero, truncations=zero,
                     max_stage=zero, action_counts=jnp.zeros(N_ACTIONS, jnp.int32),
                     max_enemies=zero, max_transmissions=zero)

        def one_step(carry, key):
            obs, state, reduc_used, st = carry
            k_act, k_step = jax.random.split(key)
            action = jax.random.categorical(k_act, jnp.where(obs.action_mask, 0.0, -1e9))
            obs, state, reward, terminated, truncated, info = vstep(
                jax.random.split(k_step, num_envs), state, action, params)
            final = info["final_observation"]
            parts = sum(info["reward_breakdown"].values())
            done = terminated | truncated
            reduc_used = (reduc_used | (action == PROGRAM_ACTION_OFFSET + REDUC)) & ~done
            st = dict(
                invalid_actions=st["invalid_actions"] + jnp.sum(info["invalid_action"]),
                hp_out_of_range=st["hp_out_of_range"]
                + jnp.sum((state.player.hp < 0) | (state.player.hp > 3)),
                max_overflow=jnp.maximum(st["max_overflow"], jnp.max(info["overflow"])),
                non_finite=st["non_finite"] + jnp.sum(~jnp.isfinite(reward)),
                max_breakdown_error=jnp.maximum(st["max_breakdown_error"],
                                                jnp.max(jnp.abs(parts - reward))),
                obs_out_of_range=st["obs_out_of_range"] + _obs_out_of_range(final)
                + _obs_out_of_range(obs),
                data_invariant_violations=st["data_invariant_violations"]
                + jnp.sum(jax.vmap(_data_invariant_violations)(state) * ~reduc_used),
                off_board_entities=st["off_board_entities"] + jnp.sum(jax.vmap(_off_board)(state)),
                episodes=st["episodes"] + jnp.sum(done),
                stage_completions=st["stage_completions"] + jnp.sum(info["stage_complete"]),
                wins=st["wins"] + jnp.sum(info["won"]),
                deaths=st["deaths"] + jnp.sum(info["died"]),
                truncations=st["truncations"] + jnp.sum(truncated),
                max_stage=jnp.maximum(st["max_stage"], jnp.max(info["stage"])),
                action_counts=st["action_counts"]
                + jnp.sum(jax.nn.one_hot(action, N_ACTIONS, dtype=jnp.int32), axis=0),
                max_enemies=jnp.maximum(st["max_enemies"],
                                        jnp.max(jnp.sum(state.enemies.active, axis=1))),
                max_transmissions=jnp.maximum(st["max_transmissions"],
                                              jnp.max(jnp.sum(state.transmissions.active, axis=1))),
            )
            return (obs, state, reduc_used, st), None

        (_, _, _, stats), _ = jax.lax.scan(one_step, (obs, state, reduc_used, stats),
                                           jax.random.split(key, num_steps))
        return stats

    return soak


def run_soak(num_envs: int, num_steps: int, seed: int = 0, env: HackMatrix | None = None,
             params=None) -> dict:
    env = env or HackMatrix()
    params = params or env.default_params
    stats = jax.jit(make_soak(env, params, num_envs, num_steps))(jax.random.PRNGKey(seed))
    report = {k: np.asarray(v).tolist() if np.ndim(v) else np.asarray(v).item()
              for k, v in jax.device_get(stats).items()}
    report["steps"] = num_envs * num_steps
    return report
