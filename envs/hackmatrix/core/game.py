"""One game step (game-rules §4, ``tryExecuteAction``): ``step_game`` is the ordered checklist
of sub-systems, one function each, read top to bottom:

    1. ``reward_baseline``: what the reward compares with (score, HP, credits, energy, BFS
       distance to the exit), before anything moves
    2. ``player_action``: a direction (shoot or move), the siphon or a program; a failed action
       changes nothing (every sub-system below is gated by its success)
    3. ``complete_stage``: an exit reached completes the stage (no enemy turn)
    4. ``enemies.run_enemy_turn``: otherwise a turn-ending action runs the enemy turn
    5. ``reward_inputs``: death, siphon-death, kills and everything else the reward reads

Every sub-system runs for every lane under vmap and is kept only where it applies; the loops
inside them (stage generation, enemy movement, spawns) are gated so that a batch in which no
lane needs them runs no iterations, and the rare siphon and programs run only on their lanes
(the sparse-update plumbing at the end of this file).
"""

from typing import NamedTuple

from flax import struct
import jax
import jax.numpy as jnp

from . import enemies as enemy_turn
from . import history, programs, rewards
from .constants import (ACTION_SIPHON, BLOCK, DATA_SIPHON, DIR_DCOL, DIR_DROW, EMPTY, EXIT, GRID,
                        N_CELLS, N_DIRECTIONS, N_PROGRAMS, N_STAGES, PROGRAM_ACTION_OFFSET, RESET,
                        WAIT, MIN_SCHEDULE_INTERVAL, SIPHON_SCHEDULE_DELAY)
from .entities import cell_index, first_in_order, on_board
from .sparse import sparse_update, tree_where
from .state import EnvState, Player, with_snapshots, without_snapshots

_MAX_RANGE = GRID  # a line of fire leaves the board within 6 cells


@struct.dataclass
class StepEvents:
    """What happened in one step, beyond the state itself."""

    success: jax.Array  # the action did not fail (R4)
    shot: jax.Array  # a direction action that hit a target instead of moving
    exit_reached: jax.Array  # stage completed (or game won) by this action
    game_won: jax.Array
    enemy_turn_ran: jax.Array  # a normal (not STEP-skipped) enemy turn ran
    undo_exploit_completion: jax.Array  # stage completed on a board restored by UNDO (R9)
    kills: jax.Array


def step_keys(key):
    """(program key, stage-generation key, enemy-turn key) of a step."""
    return jax.random.split(key, 3)


def step_game(state: EnvState, action, key, *, close_undo_exploit: bool = False):
    """Swift ``tryExecuteAction`` followed by the reward inputs: the checklist of the module
    docstring, one sub-system per line. Returns (state, rewards.RewardInputs, StepEvents).

    The board of a stage advance is left to the caller, which generates stage advances and new
    games in one pass (``HackMatrix``'s stage-advance-or-reset path): the returned state has the
    old board where ``events.exit_reached & ~events.game_won``, and ``new_distance`` is 0; the
    caller generates with ``step_keys(key)[1]`` and measures the distance on the board the step
    ends on. Nothing after ``completeStage`` reads the board on those lanes (an exit ends no
    turn)."""
    k_program, _, k_enemy = step_keys(key)  # the stage key is the caller's (see above)
    before = reward_baseline(state)
    state, act = player_action(state, action, k_program)
    undo_exploit = act.exit_reached & state.board_from_undo
    state, won = complete_stage(state, act.exit_reached, close_undo_exploit)
    ends_turn = act.ends_turn
    state, turn_ran = enemy_turn.run_enemy_turn(state, k_enemy, ends_turn)
    inputs = reward_inputs(before, state, act, ends_turn, won)
    events = StepEvents(success=act.success, shot=act.direction_ok & act.shot,
                        exit_reached=act.exit_reached, game_won=won, enemy_turn_ran=turn_ran,
                        undo_exploit_completion=undo_exploit, kills=inputs.total_kills)
    return state, inputs, events


class RewardBaseline(NamedTuple):
    """What the reward compares the step's end with (§8.1 ``old_*``)."""
    player: Player  # score, HP, credits, energy before the action
    distance: jax.Array  # BFS distance to the exit on the pre-action board


def reward_baseline(state: EnvState) -> RewardBaseline:
    return RewardBaseline(state.player, rewards.player_exit_distance(state))


class ActionOutcome(NamedTuple):
    """What ``player_action`` did. At most one of the three kinds succeeded."""
    direction_ok: jax.Array  # bool: a direction action shot or moved
    shot: jax.Array  # bool: ``direction_action``'s, valid where direction_ok
    direction_exit: jax.Array  # bool: ``direction_action``'s, valid where direction_ok
    direction_kills: jax.Array  # i32: ``direction_action``'s, valid where direction_ok
    collected: jax.Array  # bool: ``direction_action``'s, valid where direction_ok
    siphon_ok: jax.Array  # bool: SIPHON with a data siphon in hand
    siphon_quality: tuple  # (optimal, missed credits, missed energy): ``rewards.siphon_quality``
    program_ok: jax.Array  # bool: a program that ``programs.can_execute``
    program: jax.Array  # i32: the program index (clipped; meaningful where program_ok)
    program_events: programs.ProgramEvents
    success: jax.Array  # bool: the action did not fail (R4)
    exit_reached: jax.Array  # bool: by a move onto the exit or by a program (§10.1)

    @property
    def ends_turn(self):
        """§4: a move or shot that did not reach the exit, the siphon and WAIT end the turn."""
        return ((self.direction_ok & ~self.direction_exit) | self.siphon_ok
                | (self.program_ok & (self.program == WAIT)))


def player_action(state: EnvState, action, key) -> tuple[EnvState, ActionOutcome]:
    """The player's action (game-rules §4): a direction (shoot or move, §5), the siphon (§6) or a
    program (programs §4, with ``key``). A failed action (R4), an index outside 0..27
    included, leaves the state unchanged."""
    # An index outside 0..27 is no action and fails (the acquire macro plays 28 where it is
    # not offered): Swift aborts on one, here it is an invalid action (R4).
    is_direction = (action >= 0) & (action < N_DIRECTIONS)
    is_siphon = action == ACTION_SIPHON
    program = jnp.clip(action - PROGRAM_ACTION_OFFSET, 0, N_PROGRAMS - 1)
    is_program = (action >= PROGRAM_ACTION_OFFSET) & (action < PROGRAM_ACTION_OFFSET + N_PROGRAMS)

    moved_state, dir_ok, shot, dir_exit, dir_kills, collected = direction_action(
        state, jnp.clip(action, 0, N_DIRECTIONS - 1))
    dir_ok &= is_direction
    siphon_ok = is_siphon & (state.player.data_siphons > 0)
    program_ok = is_program & programs.can_execute(state)[program]
    success = dir_ok | siphon_ok | program_ok

    # At most one of the three applies; each leaves the state alone where it does not.
    new = tree_where(dir_ok, moved_state, state)
    new, quality = _siphon_where(new, siphon_ok)
    new, program_events = _program_where(new, program_ok, program, key)
    exit_reached = (dir_ok & dir_exit) | (program_ok & program_events.exit_reached)
    return new, ActionOutcome(dir_ok, shot, dir_exit, dir_kills, collected, siphon_ok, quality,
                              program_ok, program, program_events, success, exit_reached)


class DirectionOutcome(NamedTuple):
    """What ``direction_action`` did; on failure ``state`` is the state unchanged."""
    state: EnvState
    success: jax.Array  # bool: shot or moved
    shot: jax.Array  # bool: a transmission or an enemy in line was hit (§5.1)
    exit_reached: jax.Array  # bool: the player stepped onto the exit
    kills: jax.Array  # i32: 1 if the shot killed a non-scheduled target, else 0
    siphon_collected: jax.Array  # bool: the player stepped onto a floor data siphon


def direction_action(state: EnvState, direction) -> DirectionOutcome:
    """``tryAttackOrMove`` (game-rules §5); a failure leaves the state unchanged."""
    p, e, t, g = state.player, state.enemies, state.transmissions, state.grid
    drow, dcol = jnp.asarray(DIR_DROW)[direction], jnp.asarray(DIR_DCOL)[direction]
    steps = jnp.arange(1, _MAX_RANGE + 1)
    rows, cols = p.row + steps * drow, p.col + steps * dcol
    inside = on_board(rows, cols)
    line_cells = jnp.where(inside, cell_index(rows, cols), 0)
    t_here = t.active[:, None] & (t.row[:, None] == rows) & (t.col[:, None] == cols)  # [T, 6]
    e_here = e.active[:, None] & (e.row[:, None] == rows) & (e.col[:, None] == cols)  # [E, 6]
    block_here = inside & (g.content[line_cells] == BLOCK)
    # §5.1: occupants are checked before the block, so a target standing on a block is hit.
    occupied = jnp.any(t_here, axis=0) | jnp.any(e_here, axis=0)
    stop = ~inside | occupied | block_here
    first_stop = jnp.argmax(stop)
    at_stop = steps == first_stop + 1
    hit_transmission = jnp.any(at_stop & jnp.any(t_here, axis=0))
    hit_enemy = ~hit_transmission & jnp.any(at_stop & jnp.any(e_here, axis=0))
    _, t_target = first_in_order(jnp.any(t_here & at_stop, axis=1), t.seq)
    _, e_target = first_in_order(jnp.any(e_here & at_stop, axis=1), e.seq)
    t_target &= hit_transmission
    e_target &= hit_enemy
    # A transmission dies to one hit; an enemy loses attackDamage and is stunned if it survives.
    new_hp = jnp.where(e_target, jnp.maximum(0, e.hp - p.attack), e.hp)
    enemy_dies = e_target & (new_hp <= 0)
    kills = (jnp.any(t_target & ~t.from_scheduled) | jnp.any(enemy_dies & ~e.from_scheduled))
    enemies = e.replace(hp=new_hp, stunned=e.stunned | (e_target & (new_hp > 0)),
                        active=e.active & ~enemy_dies)
    transmissions = t.replace(active=t.active & ~t_target)
    shot = hit_transmission | hit_enemy
    # §5.3: otherwise step to the adjacent cell if it is on the board and not a block.
    dest_row, dest_col = p.row + drow, p.col + dcol
    dest_inside = on_board(dest_row, dest_col)
    dest = jnp.where(dest_inside, cell_index(dest_row, dest_col), 0)
    moves = ~shot & dest_inside & (g.content[dest] != BLOCK)
    dest_content = jnp.where(moves, g.content[dest], EMPTY)
    collected = dest_content == DATA_SIPHON  # walking collects floor siphons, never resources
    reaches_exit = dest_content == EXIT
    content = jnp.where(collected & (jnp.arange(N_CELLS) == dest), EMPTY, g.content)
    player = p.replace(row=jnp.where(moves, dest_row, p.row), col=jnp.where(moves, dest_col, p.col),
                       data_siphons=p.data_siphons + collected)
    new_state = state.replace(player=player, enemies=enemies, transmissions=transmissions,
                              grid=g.replace(content=content))
    return DirectionOutcome(new_state, shot | moves, shot, reaches_exit, kills.astype(jnp.int32),
                            collected)


def siphon_action(state: EnvState) -> EnvState:
    """``performSiphon`` (game-rules §6): the whole cross, centre first, then U, D, L, R."""
    p, g = state.player, state.grid
    centre = cell_index(p.row, p.col)
    cross_rows = p.row + jnp.array([0, 1, -1, 0, 0])
    cross_cols = p.col + jnp.array([0, 0, 0, -1, 1])
    program_rank = state.program_rank
    score, pending = p.score, state.pending_siphon
    credits, energy = p.credits, p.energy
    siphoned, spawn, question = g.siphoned, g.spawn, g.question
    cell_credits, cell_energy = g.credits, g.energy
    for i in range(5):  # static: the order matters for program acquisition order
        inside = on_board(cross_rows[i], cross_cols[i])
        cell = jnp.where(inside, cell_index(cross_rows[i], cross_cols[i]), 0)
        here = (jnp.arange(N_CELLS) == cell) & inside & ~siphoned
        take = jnp.any(here)
        is_block = take & (g.content[cell] == BLOCK)
        program = g.program[cell]
        score += jnp.where(is_block & (program < 0), g.points[cell], 0)
        pending += jnp.where(is_block, spawn[cell], 0)
        acquire = (is_block & (program >= 0)
                   & (program_rank[jnp.maximum(program, 0)] < 0))
        next_rank = jnp.max(program_rank) + 1
        program_rank = jnp.where(acquire & (jnp.arange(program_rank.shape[0]) == program),
                                 jnp.maximum(next_rank, 0), program_rank)
        spawn = jnp.where(here & is_block, 0, spawn)
        question = jnp.where(here & is_block, False, question)  # revealed
        floor = take & ~is_block
        credits += jnp.where(floor, cell_credits[cell], 0)
        energy += jnp.where(floor, cell_energy[cell], 0)
        cell_credits = jnp.where(here & floor, 0, cell_credits)
        cell_energy = jnp.where(here & floor, 0, cell_energy)
        siphoned = siphoned | here
    grid = g.replace(siphoned=siphoned, spawn=spawn, question=question, credits=cell_credits,
                     energy=cell_energy,
                     siphon_center=g.siphon_center | (jnp.arange(N_CELLS) == centre))
    player = p.replace(score=score, credits=credits, energy=energy,
                       data_siphons=p.data_siphons - 1)
    return state.replace(
        grid=grid, player=player, program_rank=program_rank, pending_siphon=pending,
        sched_interval=jnp.maximum(MIN_SCHEDULE_INTERVAL, state.sched_interval - 1),
        next_sched_turn=state.next_sched_turn + SIPHON_SCHEDULE_DELAY)


def complete_stage(state: EnvState, enabled, close_undo_exploit: bool):
    """``completeStage`` (game-rules §10.1) up to the new board. Returns (state, won): stage,
    interval and HP are already the new stage's; its board (``initializeStage`` on the lanes
    that advanced) is generated by the caller, ``HackMatrix``'s one stage-advance-or-reset
    path, with the step's stage key (``step_keys(key)[1]``)."""
    hp = state.player.hp
    state = state.replace(player=state.player.replace(hp=jnp.where(enabled & (hp < 3), hp + 1, hp)))
    won = enabled & (state.stage >= N_STAGES)
    advance = enabled & (state.stage < N_STAGES)
    stage = jnp.where(advance, state.stage + 1, state.stage)
    state = state.replace(stage=stage,
                          sched_interval=jnp.where(advance, 13 - stage, state.sched_interval))
    if close_undo_exploit:  # decisions R9: no UNDO into an earlier stage's board
        state = history.clear_history(state, advance)
    return state, won


def reward_inputs(before: RewardBaseline, state: EnvState, act: ActionOutcome, ends_turn,
                  won) -> rewards.RewardInputs:
    """What the reward reads (§8.1): the baseline, the action's outcome and the state the step
    ends on (death, siphon-death and kills included)."""
    p, np_ = before.player, state.player
    died = np_.hp == 0
    e = state.enemies
    adjacent = (jnp.abs(e.row - np_.row) + jnp.abs(e.col - np_.col)) == 1
    # §8.7: evaluated whenever runEnemyTurn was called (a STEP-skipped call included).
    died_to_siphon = ends_turn & died & jnp.any(e.active & e.from_siphon & adjacent)
    kills = (jnp.where(act.direction_ok, act.direction_kills, 0)
             + jnp.where(act.program_ok, act.program_events.kills, 0))
    siphon_optimal, missed_credits, missed_energy = act.siphon_quality
    return rewards.RewardInputs(
        old_score=p.score, old_hp=p.hp, old_credits=p.credits, old_energy=p.energy,
        old_distance=before.distance,
        new_distance=jnp.int32(0), success=act.success,
        stage_advanced=act.exit_reached, game_won=won, player_died=died, total_kills=kills,
        data_siphon_collected=act.direction_ok & act.collected, siphon_used=act.siphon_ok,
        siphon_optimal=siphon_optimal, missed_credits=missed_credits, missed_energy=missed_energy,
        reset_wasteful=act.program_ok & (act.program == RESET) & (p.hp == 2),
        died_to_siphon_enemy=died_to_siphon, score=np_.score, hp=np_.hp, credits=np_.credits,
        energy=np_.energy, stage=state.stage)


# --- sparse-update plumbing ------------------------------------------------------------------
# Siphons and programs are a small share of actions: under vmap only their lanes compute them
# (``sparse_update``). The sparse carries leave out what the work does not write (the history
# ring, and for programs its snapshots, which UNDO only reads): less to gather, scatter and
# compile.

def _siphon_with_quality(carry):
    state, _ = carry
    return siphon_action(state), rewards.siphon_quality(state)  # quality on the untouched board


def _program_with_events(carry, snapshots, program, key):
    state, _ = carry
    state, events = programs.apply_program(with_snapshots(state, snapshots), program, key)
    return without_snapshots(state), events


_sparse_siphon = sparse_update(_siphon_with_quality)
_sparse_program = sparse_update(_program_with_events)


def _siphon_where(state: EnvState, siphon_ok):
    """``siphon_action`` and the siphon quality where ``siphon_ok``; elsewhere the state and an
    optimal, nothing-missed quality."""
    no_quality = (jnp.bool_(True), jnp.int32(0), jnp.int32(0))
    new_wo_history, quality = _sparse_siphon(siphon_ok, (state.replace(history=None), no_quality))
    return new_wo_history.replace(history=state.history), quality


def _program_where(state: EnvState, program_ok, program, key):
    """``programs.apply_program`` where ``program_ok``; elsewhere the state and no events."""
    no_events = programs.ProgramEvents(kills=jnp.int32(0), exit_reached=jnp.bool_(False),
                                       ends_turn=jnp.bool_(False))
    snapshots = state.history.snapshots
    new, events = _sparse_program(program_ok, (without_snapshots(state), no_events), snapshots,
                                  program, key)
    return with_snapshots(new, snapshots), events
