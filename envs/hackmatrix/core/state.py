"""Typed state of one HackMatrix game (game-rules §2), as fixed-shape JAX arrays.

Swift keeps enemies and transmissions in growable lists; here they are slot arrays of
static capacity (decisions R3). ``active`` marks a slot that holds a list member, and
``seq`` (a per-game creation counter) recovers Swift's list order: "first in list order"
is the active slot with the smallest ``seq``. Appends take a free slot and the next
``seq``; removals clear ``active`` and keep everybody else's ``seq``, so relative order is
kept exactly as Swift's ``removeAll`` keeps it. An append with no free slot is dropped
and counted in ``EnvState.overflow``.

Grid arrays are indexed by cell = row * 6 + col (row 0 at the bottom).
"""

from flax import struct
import jax
import jax.numpy as jnp

from .constants import EMPTY, N_CELLS, N_PROGRAMS
from .reward_ledger import RewardLedger

# Default capacities (decisions R3; see SPEC.md for the soak that justifies them).
MAX_ENEMIES = 32
MAX_TRANSMISSIONS = 32
HISTORY_SIZE = 8


@struct.dataclass
class Grid:
    content: jax.Array  # i32[36]: EMPTY, BLOCK, DATA_SIPHON, EXIT
    points: jax.Array  # i32[36]: points of a data (or data-question) block, else 0
    program: jax.Array  # i32[36]: program 0..22 of a program (or program-question) block, else -1
    spawn: jax.Array  # i32[36]: transmissionSpawn of a block, else 0
    question: jax.Array  # bool[36]: the block's content is hidden (question block)
    credits: jax.Array  # i32[36]: credits lying on the cell (at most one of credits/energy > 0)
    energy: jax.Array  # i32[36]
    siphoned: jax.Array  # bool[36]: isSiphoned
    siphon_center: jax.Array  # bool[36]


@struct.dataclass
class Player:
    row: jax.Array
    col: jax.Array
    hp: jax.Array  # 0..3
    credits: jax.Array
    energy: jax.Array
    data_siphons: jax.Array
    score: jax.Array
    attack: jax.Array  # attackDamage, starts at 1, never reset (game-rules §2.2)


@struct.dataclass
class Enemies:
    active: jax.Array  # bool[E]: slot holds a list member (hp may be <= 0 via setState)
    seq: jax.Array  # i32[E]: list order
    kind: jax.Array  # i32[E]: VIRUS, DAEMON, GLITCH, CRYPTOG
    row: jax.Array
    col: jax.Array
    hp: jax.Array
    disabled: jax.Array  # disabledTurns
    stunned: jax.Array  # bool
    last_row: jax.Array  # cryptog last-known position, -1 when unset
    last_col: jax.Array
    from_scheduled: jax.Array  # bool: isFromScheduledTask
    from_siphon: jax.Array  # bool: spawnedFromSiphon


@struct.dataclass
class Transmissions:
    active: jax.Array  # bool[T]
    seq: jax.Array
    row: jax.Array
    col: jax.Array
    turns: jax.Array  # turnsRemaining
    kind: jax.Array  # enemy type it hatches into
    from_scheduled: jax.Array
    from_siphon: jax.Array


@struct.dataclass
class Snapshot:
    """What UNDO saves and restores (programs-rewards-observation §5.2), without ids and
    provenance flags. In ``History`` every field has a leading ring-buffer axis."""

    player: Player
    turn: jax.Array
    program_rank: jax.Array
    show: jax.Array
    calm: jax.Array
    atk_uses: jax.Array
    enemies: Enemies  # from_scheduled / from_siphon are stored but restored as False
    transmissions: Transmissions
    grid: Grid
    stage: jax.Array  # stage at save time: not restored, marks boards of an earlier stage


@struct.dataclass
class History:
    snapshots: Snapshot  # every leaf has leading axis H
    head: jax.Array  # ring index of the newest snapshot
    size: jax.Array  # number of valid snapshots, 0..H


@struct.dataclass
class EnvState:
    grid: Grid
    player: Player
    enemies: Enemies
    transmissions: Transmissions
    history: History
    stage: jax.Array  # currentStage, 1..8 (stays 8 after victory)
    turn: jax.Array  # turnCount: enemy turns run in this stage
    program_rank: jax.Array  # i32[23]: acquisition order of owned programs, -1 = not owned
    show: jax.Array  # showActivated
    calm: jax.Array  # scheduledTasksDisabled
    step_active: jax.Array  # STEP pending
    pending_siphon: jax.Array  # pendingSiphonTransmissions
    atk_uses: jax.Array  # atkPlusUsesThisStage
    exit_row: jax.Array  # exitPosition
    exit_col: jax.Array
    sched_interval: jax.Array  # scheduledTaskInterval
    next_sched_turn: jax.Array  # nextScheduledTaskTurn
    next_seq: jax.Array  # next list-order key for appended enemies/transmissions
    board_from_undo: jax.Array  # the grid was restored by UNDO from an earlier stage (R9)
    overflow: jax.Array  # appends dropped for lack of a free slot (must stay 0)
    time: jax.Array  # env steps taken in this episode (for truncation)
    # The undo_pays_once training option's reward totals (reward_ledger); None without it,
    # so the game's own state is the same with or without the option.
    ledger: RewardLedger | None = None

    @property
    def owned(self) -> jax.Array:
        return self.program_rank >= 0


def _i32(value=0, shape=()):
    return jnp.full(shape, value, jnp.int32)


def _bool(value=False, shape=()):
    return jnp.full(shape, value, jnp.bool_)


def empty_grid() -> Grid:
    return Grid(
        content=_i32(EMPTY, (N_CELLS,)), points=_i32(0, (N_CELLS,)), program=_i32(-1, (N_CELLS,)),
        spawn=_i32(0, (N_CELLS,)), question=_bool(False, (N_CELLS,)), credits=_i32(0, (N_CELLS,)),
        energy=_i32(0, (N_CELLS,)), siphoned=_bool(False, (N_CELLS,)),
        siphon_center=_bool(False, (N_CELLS,)))


def default_player() -> Player:
    return Player(row=_i32(0), col=_i32(0), hp=_i32(3), credits=_i32(0), energy=_i32(0),
                  data_siphons=_i32(0), score=_i32(0), attack=_i32(1))


def empty_enemies(capacity: int = MAX_ENEMIES) -> Enemies:
    s = (capacity,)
    return Enemies(active=_bool(False, s), seq=_i32(0, s), kind=_i32(0, s), row=_i32(0, s),
                   col=_i32(0, s), hp=_i32(0, s), disabled=_i32(0, s), stunned=_bool(False, s),
                   last_row=_i32(-1, s), last_col=_i32(-1, s), from_scheduled=_bool(False, s),
                   from_siphon=_bool(False, s))


def empty_transmissions(capacity: int = MAX_TRANSMISSIONS) -> Transmissions:
    s = (capacity,)
    return Transmissions(active=_bool(False, s), seq=_i32(0, s), row=_i32(0, s), col=_i32(0, s),
                         turns=_i32(0, s), kind=_i32(0, s), from_scheduled=_bool(False, s),
                         from_siphon=_bool(False, s))


def take_snapshot(state: EnvState) -> Snapshot:
    return Snapshot(player=state.player, turn=state.turn, program_rank=state.program_rank,
                    show=state.show, calm=state.calm, atk_uses=state.atk_uses,
                    enemies=state.enemies, transmissions=state.transmissions, grid=state.grid,
                    stage=state.stage)


def empty_history(capacity: int, enemies: int, transmissions: int) -> History:
    template = Snapshot(player=default_player(), turn=_i32(0), program_rank=_i32(-1, (N_PROGRAMS,)),
                        show=_bool(), calm=_bool(), atk_uses=_i32(0),
                        enemies=empty_enemies(enemies),
                        transmissions=empty_transmissions(transmissions),
                        grid=empty_grid(), stage=_i32(1))
    snapshots = jax.tree.map(lambda x: jnp.broadcast_to(x, (capacity,) + x.shape), template)
    return History(snapshots=snapshots, head=_i32(capacity - 1), size=_i32(0))


def without_snapshots(state: EnvState) -> EnvState:
    """The state with its UNDO snapshots left out (``None``): work that does not write them
    (stage generation, the sparse program and stage passes) carries less under vmap."""
    return state.replace(history=state.history.replace(snapshots=None))


def with_snapshots(state: EnvState, snapshots) -> EnvState:
    """``without_snapshots`` undone: the state with ``snapshots`` put back."""
    return state.replace(history=state.history.replace(snapshots=snapshots))


def blank_state(max_enemies: int = MAX_ENEMIES, max_transmissions: int = MAX_TRANSMISSIONS,
                history_size: int = HISTORY_SIZE) -> EnvState:
    """The fields of a fresh Swift ``GameState`` before any generation (game-rules §2.1)."""
    return EnvState(
        grid=empty_grid(), player=default_player(), enemies=empty_enemies(max_enemies),
        transmissions=empty_transmissions(max_transmissions),
        history=empty_history(history_size, max_enemies, max_transmissions),
        stage=_i32(1), turn=_i32(0), program_rank=_i32(-1, (N_PROGRAMS,)), show=_bool(),
        calm=_bool(), step_active=_bool(), pending_siphon=_i32(0), atk_uses=_i32(0),
        exit_row=_i32(5), exit_col=_i32(5), sched_interval=_i32(12), next_sched_turn=_i32(12),
        next_seq=_i32(0), board_from_undo=_bool(), overflow=_i32(0), time=_i32(0))
