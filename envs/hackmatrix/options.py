"""The options a training run may set on HackMatrix (``envs/options.py``): the trainer's
defaults, what each is to a trained policy, and the flag help. The constructor
(``HackMatrix.__init__``) takes them and refuses a value it cannot play. Importing this module
imports no JAX."""

from __future__ import annotations

from envs.options import EnvOption, Judgement

from . import SHAPING_MODES
from .core.constants import N_PROGRAMS, N_STAGES, PROGRAM_NAMES

TRAINING_OPTIONS = (
    EnvOption("reward_shaping", "str", "potential", "game",
              "swift: Swift's one-directional distance reward (the env's own default); "
              "potential: gamma*phi(s') - phi(s) (decisions R7); the env refuses another mode"),
    EnvOption("close_undo_exploit", "bool", True, "game",
              "clear the UNDO history at each stage start (decisions R9)"),
    EnvOption("undo_pays_once", "bool", True, "game",
              "a reward that UNDO took back is not paid again (Swift pays it again, a farm "
              "trained agents find: SPEC §1.5)", absent=False),
    EnvOption("start_programs", "int", 0, "training",
              "start a share of training games with K random programs owned (a curriculum: "
              "the game starts with none; evaluation plays the game's own start; 0 = off)"),
    EnvOption("start_programs_share", "float", 0.5, "training",
              "the share of games that start with --start-programs"),
    EnvOption("start_programs_pool", "names", (), "training",
              "draw the --start-programs from these programs only, comma-separated (e.g. reset "
              "or reset,siph+; none: all 23)"),
    EnvOption("program_potential", "float", 0.0, "training",
              "potential-based shaping on the programs owned: gamma*phi(s') - phi(s), phi = C "
              "per program (0 after a death or a win), so acquiring one pays C at once and a "
              "game nets about 0; 0 = off"),
    EnvOption("program_potential_pool", "names", (), "training",
              "the potential counts only these programs, comma-separated (e.g. reset; "
              "none: all 23)"),
    EnvOption("program_block_pool", "names", (), "training",
              "a curriculum: a share of generated stage boards has the block nearest the player "
              "hold one of these programs, visible, comma-separated (e.g. reset); the player "
              "must still siphon it; evaluation plays the game's own boards; none: off"),
    EnvOption("program_block_share", "float", 0.5, "training",
              "the share of stage boards that --program-block-pool plants on"),
    EnvOption("explore_pool", "names", (), "training",
              "--explore-share takes only the siphons that would acquire one of these programs, "
              "comma-separated (e.g. reset; none: all 23)", requires=("exploration",)),
    EnvOption("acquire_macro", "bool", False, "agent",
              "one more action, 'head for a program': the next move of a plan to siphon a "
              "program block not owned, read from the observation (prior knowledge in the "
              "action space; kept when the policy plays)"),
    EnvOption("acquire_macro_pool", "names", (), "agent",
              "--acquire-macro goes only for these programs, comma-separated (e.g. reset; "
              "none: any program not owned)"),
    EnvOption("acquire_macro_from_stage", "int", 1, "agent",
              "--acquire-macro is offered only from stage K on (1: every stage)"),
    EnvOption("exit_distance_view", "bool", False, "agent",
              "the board-view encoders see one more channel per cell: its path distance to the "
              "exit, read from the observation (prior knowledge in the agent's view; kept when "
              "the policy plays)", requires=("board_view",)),
)

# Where the trainer's command lines (train_purejaxrl.py, learn_bench.py) start for HackMatrix:
# TrainConfig fields and env options over TrainConfig's defaults and the options' own (which
# play the original game, so that a config built in code without them, a baseline's or a
# human's, is the game itself). The best configuration of the full tier (SPEC §4.4,
# "stage-count"): the acquire macro for RESET, CRASH and PUSH, half the training games started
# owning one of them, the stage count as the training reward over a long horizon, and an
# anneal that ends at a fifth of the learning rate.
TRAINER_DEFAULTS = {
    "training_reward": "stage-count", "gamma": 0.999, "lr_floor": 0.2,
    "env_options": {"acquire_macro": True, "acquire_macro_pool": ("reset", "crash", "push"),
                    "start_programs": 1, "start_programs_pool": ("reset", "crash", "push")},
}

# Every policy is judged twice: in the game as Swift plays it, decisions R9's cross-stage UNDO
# loop open, and with that loop closed, the honest figures tables show (a win bought through
# the loop is no win), the loop's completions in the open game beside them.
JUDGEMENTS = (
    Judgement("eval", (("close_undo_exploit", False),),
              carried=(("undo_exploit_completions_per_episode", "R9/ep"),), tag="open"),
    Judgement("eval_closed", (("close_undo_exploit", True),), shown=True, tag="closed",
              words="R9 loop closed"),
)

POOL_OPTIONS = ("start_programs_pool", "program_potential_pool", "program_block_pool",
                "explore_pool", "acquire_macro_pool")


def program_indices(names: tuple[str, ...]) -> tuple[int, ...]:
    """The program indices of ``names`` (``constants.PROGRAM_NAMES``; ``check_values`` has
    refused unknown and repeated names)."""
    return tuple(PROGRAM_NAMES.index(name) for name in names)


def check_values(values: dict) -> None:
    """A ``ValueError`` naming the first option of ``values`` (a subset of the options, at
    the values a game would be built with) that HackMatrix cannot play, alone or with another
    one; the constructor runs it, and the trainer before anything is built."""
    def need(condition: bool, message: str):
        if not condition:
            raise ValueError(message)

    get = values.get
    if "reward_shaping" in values:
        need(get("reward_shaping") in SHAPING_MODES,
             f"reward_shaping must be one of {SHAPING_MODES}, got {get('reward_shaping')!r}")
    for name in POOL_OPTIONS:
        names = tuple(get(name, ()))
        need(all(n in PROGRAM_NAMES for n in names) and len(set(names)) == len(names),
             f"{name} must name distinct programs of {', '.join(PROGRAM_NAMES)}; "
             f"got {', '.join(map(str, names))}")
    start_programs = get("start_programs", 0)
    need(0 <= start_programs <= N_PROGRAMS,
         f"start_programs must be in 0..{N_PROGRAMS}, got {start_programs!r}")
    for name in ("start_programs_share", "program_block_share"):
        need(0.0 <= get(name, 0.5) <= 1.0, f"{name} must be in [0, 1], got {get(name)!r}")
    need(not get("start_programs_pool") or start_programs > 0,
         "start_programs_pool needs start_programs > 0 (the count drawn from the pool)")
    need(not get("start_programs_pool") or start_programs <= len(get("start_programs_pool")),
         f"start_programs ({start_programs}) is more than the "
         f"{len(get('start_programs_pool', ()))} programs of start_programs_pool")
    program_potential = get("program_potential", 0.0)
    need(program_potential >= 0.0, f"program_potential must be >= 0, got {program_potential}")
    need(not get("program_potential_pool") or program_potential > 0,
         "program_potential_pool needs program_potential > 0 (the potential per program)")
    need(not get("acquire_macro_pool") or get("acquire_macro", False),
         "acquire_macro_pool needs acquire_macro (the macro it narrows)")
    from_stage = get("acquire_macro_from_stage", 1)
    need(isinstance(from_stage, int) and not isinstance(from_stage, bool)
         and 1 <= from_stage <= N_STAGES,
         f"acquire_macro_from_stage must be a stage, 1..{N_STAGES}, got {from_stage!r}")
    need(from_stage == 1 or get("acquire_macro", False),
         "acquire_macro_from_stage needs acquire_macro (the macro it holds back)")
