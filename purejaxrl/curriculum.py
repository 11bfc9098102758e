"""Start-state curriculum: a share of training episodes starts from a state the agent itself
reached at the start of a later stage, so the rare late stages are trained on at all.

The archive keeps, for every stage from ``FIRST_ARCHIVED_STAGE`` to the env's last, a ring of
``slots`` states taken at the start of that stage (the state right after a training env
completed the stage before), with their observations. Each rollout step archives at most one
new stage start per stage (a random one among the envs that just reached it), and where an
episode ends, the env starts its next episode with probability ``share`` from an archived
state instead of its fresh reset: the stage is drawn uniformly among the stages archived so
far (so the rarest, latest ones get as many starts as the common ones), the slot uniformly
among that stage's filled slots. Evaluation always starts from normal resets.

An episode started from the archive is a part of a game: its return, length and stage say
nothing about whole games, so the rollout leaves it out of the episode statistics
(``from_archive`` marks it) and counts it apart.

The env must report ``info["stage"]`` (the stage after the step) and
``info["stage_complete"]``, and have ``num_stages``. Every device keeps its own archive (its
arrays are split over the device axis like the envs), so a curriculum run depends on the
device count, unlike a run without it.
"""

from __future__ import annotations

from typing import Any

from flax import struct
import jax
import jax.numpy as jnp

# Stage 2 starts are reached in nearly every game anyway.
FIRST_ARCHIVED_STAGE = 3


@struct.dataclass
class StartArchive:
    """One device's archive (leading axis ``stages * slots`` for the states) and the
    per-env episode marks."""

    env_state: Any  # [stages * slots, ...]: stage b's ring is rows b*slots..(b+1)*slots-1
    obs: Any  # [stages * slots, ...]
    writes: jax.Array  # i32[stages]: states written so far per stage (ring position)
    key: jax.Array  # [1, 2]: this device's stream for the archive's choices
    from_archive: jax.Array  # bool[N]: the env's current episode started from the archive


def archived_stages(num_stages: int) -> int:
    return max(num_stages - FIRST_ARCHIVED_STAGE + 1, 1)


def empty_archive(env_state, obs, num_stages: int, slots: int, key) -> StartArchive:
    """An archive shaped after one device's envs (leading axis N), with nothing written."""
    rows = archived_stages(num_stages) * slots
    blank = lambda x: jnp.zeros((rows,) + x.shape[1:], x.dtype)  # noqa: E731
    num_envs = jax.tree.leaves(obs)[0].shape[0]
    return StartArchive(env_state=jax.tree.map(blank, env_state), obs=jax.tree.map(blank, obs),
                        writes=jnp.zeros(archived_stages(num_stages), jnp.int32),
                        key=key[None], from_archive=jnp.zeros(num_envs, bool))


def _max_starts(num_envs: int) -> int:
    # Episodes last tens of steps, so a few percent of envs end per step; the cap keeps the
    # gather small (episodes beyond it in one step simply start fresh).
    return max(1, min(num_envs, num_envs // 16))


def curriculum_step(archive: StartArchive, env_state, obs, info: dict, done: jax.Array,
                    num_stages: int, slots: int, share: float):
    """After a vectorised env step (``env_state``/``obs`` already auto-reset where ``done``):
    archive this step's new stage starts, then restart a ``share`` of the ended episodes from
    the archive. Returns (env_state, obs, archive, ended_from_archive: bool[N], the episodes
    that just ended and had started from the archive)."""
    stages = archived_stages(num_stages)
    key, write_key, start_key, stage_key, slot_key = jax.random.split(archive.key[0], 5)
    num_envs = done.shape[0]

    # 1. Archive: the envs that completed a stage and go on are at the start of info["stage"].
    reached = info["stage_complete"] & ~done
    noise = jax.random.uniform(write_key, (num_envs,))
    state_rows, obs_rows, writes = archive.env_state, archive.obs, archive.writes
    for b in range(stages):
        candidates = reached & (info["stage"] == FIRST_ARCHIVED_STAGE + b)
        lane = jnp.argmax(jnp.where(candidates, noise, -1.0))
        found = jnp.any(candidates)
        row = b * slots + writes[b] % slots

        def put(rows, batch, row=row, lane=lane, found=found):
            return rows.at[row].set(jnp.where(found, batch[lane], rows[row]))
        state_rows = jax.tree.map(put, state_rows, env_state)
        obs_rows = jax.tree.map(put, obs_rows, obs)
        writes = writes.at[b].add(found.astype(jnp.int32))

    # 2. Restart: the chosen ended episodes take an archived state and its observation.
    filled = jnp.minimum(writes, slots)
    available = filled > 0
    wanted = done & (jax.random.uniform(start_key, (num_envs,)) < share) & jnp.any(available)
    stage = jax.random.categorical(stage_key, jnp.where(available, 0.0, -jnp.inf),
                                   shape=(num_envs,))
    slot = jnp.floor(jax.random.uniform(slot_key, (num_envs,)) * filled[stage]).astype(jnp.int32)
    source = stage * slots + jnp.minimum(slot, slots - 1)
    lanes = jnp.nonzero(wanted, size=_max_starts(num_envs), fill_value=num_envs)[0]
    picked = source[jnp.minimum(lanes, num_envs - 1)]
    place = lambda batch, rows: batch.at[lanes].set(rows[picked], mode="drop")  # noqa: E731
    env_state = jax.tree.map(place, env_state, state_rows)
    obs = jax.tree.map(place, obs, obs_rows)
    started = jnp.zeros(num_envs, bool).at[lanes].set(True, mode="drop")

    ended_from_archive = done & archive.from_archive
    archive = archive.replace(env_state=state_rows, obs=obs_rows, writes=writes,
                              key=key[None],
                              from_archive=jnp.where(done, started, archive.from_archive))
    return env_state, obs, archive, ended_from_archive
