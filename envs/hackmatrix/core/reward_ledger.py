"""A reward undone by UNDO is not paid again: the ``undo_pays_once`` training option.

Not Swift. In Swift, UNDO restores the board (programs-rewards-observation §5.3) and the next
step's reward is computed from the ordinary deltas and events (§5.5.6, §8), so whatever UNDO
takes back can be earned again: walking onto a floor data siphon, UNDO twice (free, §5.5.1),
walking onto it again pays the ``data_siphon`` reward once per three actions, and a trained
agent finds that loop (SPEC §4.4). Decisions R9 closes the cross-stage loop only.

Under this option each component (but the per-action ``step_penalty``) keeps two episode
totals, of its positive parts (``gains``) and of its negative parts (``losses``). UNDO
restores them to their values at the popped snapshot, so they travel with the board; the best
``gains`` and the worst ``losses`` the episode has reached do not. A step pays a component
only what takes its totals beyond those marks. Without an UNDO the totals are the marks and
every step pays exactly Swift's components; after an UNDO, re-earning what was undone pays 0
and re-suffering a penalty that was undone costs 0. An UNDO step itself pays only its step
penalty.
"""

from flax import struct
import jax
import jax.numpy as jnp

# Paid on every step as Swift pays them: a cost per action, which no UNDO takes back.
PAID_EVERY_STEP = ("step_penalty",)


@struct.dataclass
class RewardLedger:
    gains: jax.Array  # f32[C]: episode totals of each component's positive parts (UNDO restores)
    losses: jax.Array  # f32[C]: ... of its negative parts (UNDO restores)
    best_gains: jax.Array  # f32[C]: the highest ``gains`` of the episode (UNDO keeps)
    worst_losses: jax.Array  # f32[C]: the lowest ``losses`` of the episode (UNDO keeps)
    saved_gains: jax.Array  # f32[H, C]: ``gains`` at each UNDO snapshot, in its ring slot
    saved_losses: jax.Array  # f32[H, C]


def empty_ledger(history_size: int, components: int) -> RewardLedger:
    row = jnp.zeros((components,), jnp.float32)
    ring = jnp.zeros((history_size, components), jnp.float32)
    return RewardLedger(gains=row, losses=row, best_gains=row, worst_losses=row,
                        saved_gains=ring, saved_losses=ring)


def pay_once(ledger: RewardLedger, rewards: jax.Array, ledgered: jax.Array, undid,
             popped_slot, pushed, pushed_slot) -> tuple[jax.Array, RewardLedger]:
    """(paid f32[C], the next ledger) of one step.

    ``rewards``: the step's components as Swift computes them (f32[C]); ``ledgered``: bool[C],
    the components paid once (the others are paid as they are); ``undid``: the step was a
    successful UNDO, which popped ring slot ``popped_slot``; ``pushed``: the step ended with an
    enemy turn that saved a snapshot in ring slot ``pushed_slot`` (game-rules §11). An UNDO
    ends no turn, so the two never coincide."""
    restored_gains = jax.lax.dynamic_index_in_dim(ledger.saved_gains, popped_slot, keepdims=False)
    restored_losses = jax.lax.dynamic_index_in_dim(ledger.saved_losses, popped_slot,
                                                   keepdims=False)
    gained, lost = jnp.maximum(rewards, 0.0), jnp.minimum(rewards, 0.0)
    gains = jnp.where(undid, restored_gains, ledger.gains + gained)
    losses = jnp.where(undid, restored_losses, ledger.losses + lost)
    # Where the totals stand at their marks (no UNDO debt) the step pays its own components
    # exactly, not a difference of rounded totals.
    gain_paid = jnp.where(ledger.gains >= ledger.best_gains, gained,
                          jnp.maximum(gains - ledger.best_gains, 0.0))
    loss_paid = jnp.where(ledger.losses <= ledger.worst_losses, lost,
                          jnp.minimum(losses - ledger.worst_losses, 0.0))
    once = jnp.where(undid, 0.0, gain_paid + loss_paid)
    paid = jnp.where(ledgered, once, rewards)

    def save(ring, value):
        kept = jax.lax.dynamic_index_in_dim(ring, pushed_slot, keepdims=False)
        return jax.lax.dynamic_update_index_in_dim(ring, jnp.where(pushed, value, kept),
                                                   pushed_slot, 0)

    return paid, RewardLedger(
        gains=gains, losses=losses, best_gains=jnp.maximum(ledger.best_gains, gains),
        worst_losses=jnp.minimum(ledger.worst_losses, losses),
        saved_gains=save(ledger.saved_gains, gains), saved_losses=save(ledger.saved_losses, losses))
