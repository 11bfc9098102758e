"""The UNDO history: a ring buffer of end-of-enemy-turn snapshots (programs-rewards-observation §5,
game-rules §11, decisions R3/R9).

Swift keeps an unbounded stack; here it is a ring of the H most recent snapshots (H = the
leading axis of ``History.snapshots``): a push beyond H drops the oldest one (decisions R3).
``head`` is the ring index of the newest snapshot, ``size`` the number of valid ones.
Every function takes an ``enabled`` flag so it can sit unconditionally in a vmapped step;
a push or pop reads and writes one ring slot only.
"""

import jax
import jax.numpy as jnp

from .entities import list_rank
from .sparse import tree_where
from .state import EnvState, History, Snapshot, take_snapshot


def _capacity(history: History) -> int:
    return history.snapshots.turn.shape[0]


def _read_slot(snapshots: Snapshot, index) -> Snapshot:
    return jax.tree.map(lambda ring: jax.lax.dynamic_index_in_dim(ring, index, keepdims=False),
                        snapshots)


def _fresh_seq(active: jax.Array, seq: jax.Array, first) -> jax.Array:
    """New list keys first, first + 1, ... for the active slots, in their saved list order."""
    return jnp.where(active, first + list_rank(active, seq), seq)


def push_snapshot(state: EnvState, enabled=True) -> EnvState:
    """Save the §5.2 fields (and the current stage) as the newest snapshot when ``enabled``.

    Swift calls this at the very end of every real enemy turn (§5.1), also when the player has
    just died. With H snapshots already stored the oldest is overwritten (decisions R3)."""
    enabled = jnp.asarray(enabled, jnp.bool_)
    history = state.history
    capacity = _capacity(history)
    slot = (history.head + 1) % capacity
    # Disabled: write the slot's own content back, so only one slot is ever touched.
    value = tree_where(enabled, take_snapshot(state), _read_slot(history.snapshots, slot))
    snapshots = jax.tree.map(
        lambda ring, v: jax.lax.dynamic_update_index_in_dim(ring, v, slot, 0),
        history.snapshots, value)
    return state.replace(history=History(
        snapshots=snapshots,
        head=jnp.where(enabled, slot, history.head),
        size=jnp.where(enabled, jnp.minimum(history.size + 1, capacity), history.size)))


def undo(state: EnvState, enabled=True) -> EnvState:
    """Swift ``restoreSnapshot`` when ``enabled`` (and the history is non-empty): pop the newest
    snapshot and write back exactly the §5.2 fields.

    Enemies and transmissions come back as new objects (§5.3): provenance flags false and fresh
    list keys ``seq`` (starting at ``next_seq``, enemies first, each list in its saved order).
    Kept as they are (§5.4): stage, exit position, step_active, pending_siphon, the scheduler,
    overflow and time. Credits are overwritten, so a cost paid before this is refunded (§4.10).

    ``board_from_undo`` becomes true when the snapshot was saved in an earlier stage (decisions
    R9), and stays true otherwise: every snapshot pushed after a cross-stage UNDO is tagged with
    the new stage but still holds the old board, so only a fresh stage may clear the flag.
    """
    history = state.history
    enabled = jnp.asarray(enabled, jnp.bool_) & (history.size > 0)
    capacity = _capacity(history)
    snap = _read_slot(history.snapshots, history.head)

    enemy_count = jnp.sum(snap.enemies.active, dtype=jnp.int32)
    transmission_count = jnp.sum(snap.transmissions.active, dtype=jnp.int32)
    enemies = snap.enemies.replace(
        seq=_fresh_seq(snap.enemies.active, snap.enemies.seq, state.next_seq),
        from_scheduled=jnp.zeros_like(snap.enemies.from_scheduled),
        from_siphon=jnp.zeros_like(snap.enemies.from_siphon))
    transmissions = snap.transmissions.replace(
        seq=_fresh_seq(snap.transmissions.active, snap.transmissions.seq,
                       state.next_seq + enemy_count),
        from_scheduled=jnp.zeros_like(snap.transmissions.from_scheduled),
        from_siphon=jnp.zeros_like(snap.transmissions.from_siphon))

    restored = (snap.player, snap.turn, snap.program_rank, snap.show, snap.calm, snap.atk_uses,
                enemies, transmissions, snap.grid,
                state.next_seq + enemy_count + transmission_count,
                state.board_from_undo | (snap.stage != state.stage))
    current = (state.player, state.turn, state.program_rank, state.show, state.calm,
               state.atk_uses, state.enemies, state.transmissions, state.grid, state.next_seq,
               state.board_from_undo)
    (player, turn, program_rank, show, calm, atk_uses, enemies, transmissions, grid, next_seq,
     board_from_undo) = tree_where(enabled, restored, current)
    return state.replace(
        player=player, turn=turn, program_rank=program_rank, show=show, calm=calm,
        atk_uses=atk_uses, enemies=enemies, transmissions=transmissions, grid=grid,
        next_seq=next_seq, board_from_undo=board_from_undo,
        history=history.replace(
            head=jnp.where(enabled, (history.head - 1) % capacity, history.head),
            size=jnp.where(enabled, history.size - 1, history.size)))


def clear_history(state: EnvState, enabled=True) -> EnvState:
    """Forget every snapshot when ``enabled``: the decisions-R9 option that closes the
    cross-stage UNDO exploit calls it at each stage start. Not Swift behaviour."""
    history = state.history
    return state.replace(history=history.replace(
        size=jnp.where(jnp.asarray(enabled, jnp.bool_), 0, history.size)))
