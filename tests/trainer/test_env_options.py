"""The envs' own training options (``envs/options.py``): an env declares them, and the trainer
carries them (config, flags, records, play) without naming any of them."""

import os
import pathlib
import subprocess
import sys

import pytest

from envs import registry
from envs.hackmatrix import HackMatrix
from envs.options import AS_IT_IS, ROLES, EnvOption, shown_judgement
from purejaxrl.cli.parsing import env_option_table
from purejaxrl.cli.train import build_parser, config_from_args
from purejaxrl.config import (LEGACY_ENV_OPTION_FIELDS, ConfigError, TrainConfig,
                              config_differences, validate_config)

ROOT = pathlib.Path(__file__).resolve().parents[2]
HACKMATRIX_OPTIONS = registry.training_options("hackmatrix")


def test_the_registry_reads_the_classs_options_without_jax():
    """What the command lines and configs read before JAX may be imported
    (``registry.training_options``) is the env class's own ``training_options``."""
    assert HackMatrix.training_options == HACKMATRIX_OPTIONS
    assert registry.training_options("toy") == () == registry.training_options("CartPole-v1")
    code = ("import sys; from envs import registry; from purejaxrl.cli import parsing; "
            "registry.training_options('hackmatrix'); parsing.env_option_table(); "
            "registry.check_option_values('hackmatrix', {'start_programs': 1}); "
            "registry.judgements('hackmatrix'); registry.trainer_defaults('hackmatrix'); "
            "print('jax' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize("env_id", ["hackmatrix", "toy", "CartPole-v1"])
def test_every_judgement_sets_only_game_rules_the_env_takes(env_id):
    """An env's judgements (``registry.judgements``) are the learning benchmark's ledger keys:
    each distinct, the first ``eval`` (every env's row has it, also the rows written before an
    env declared more), one shown; each sets only options of role "game" that the env takes
    (a judgement changes the rules a policy is judged under, never the policy), and the
    figures it carries into the shown one are the env's evaluation summaries."""
    judgements = registry.judgements(env_id)
    keys = [judgement.key for judgement in judgements]
    assert keys[0] == "eval" and len(set(keys)) == len(keys)
    assert sum(judgement.shown for judgement in judgements) <= 1
    game_rules = {option.name for option in registry.training_options(env_id)
                  if option.role == "game"}
    for judgement in judgements:
        assert {name for name, _ in judgement.options} <= game_rules, judgement
    if env_id == "hackmatrix":  # the honest judgement: R9's loop closed, its count carried
        assert shown_judgement(judgements).options == (("close_undo_exploit", True),)
        from envs.hackmatrix.training import METRICS
        summaries = {metric.summary for metric in METRICS}
        assert {key for j in judgements for key, _ in j.carried} <= summaries
    else:
        assert judgements == AS_IT_IS


def test_every_option_is_a_flag_and_reaches_the_config_and_back():
    """Each option of our envs is a ``--`` flag of the training command (not given: None);
    given ones land in ``TrainConfig.env_options``; a record of the config reads back equal."""
    table = env_option_table()
    assert set(table) == {option.name for option in HACKMATRIX_OPTIONS}
    args = build_parser().parse_args([])
    assert all(getattr(args, name) is None for name in table)
    args = build_parser().parse_args(["--acquire-macro", "--acquire-macro-pool", "reset",
                                      "--start-programs", "1", "--program-potential", "0.5",
                                      "--no-undo-pays-once", "--reward-shaping", "swift"])
    config = config_from_args(args, None, 1, say=lambda *a, **k: None)
    assert dict(config.env_options) == {
        "acquire_macro": True, "acquire_macro_pool": ("reset",), "start_programs": 1,
        "program_potential": 0.5, "undo_pays_once": False, "reward_shaping": "swift"}
    record = config.to_dict()
    assert set(record["env_options"]) == set(table)  # every option, at the run's value
    assert record["env_options"]["acquire_macro_pool"] == ["reset"]  # JSON: a list
    assert TrainConfig.from_dict(record) == config
    validate_config(config)


def test_an_option_at_its_default_is_the_same_config_as_an_option_not_set():
    """One run, one config: how its options were written does not change it (equality, hash,
    record), so a resume with the default spelled out is not a different run."""
    spelled = TrainConfig(env_options={"start_programs": 0, "acquire_macro": False,
                                       "reward_shaping": "potential"})
    assert spelled == TrainConfig() and hash(spelled) == hash(TrainConfig())
    assert spelled.to_dict() == TrainConfig().to_dict()
    assert config_differences(TrainConfig(), TrainConfig().with_env_options(start_programs=2)) \
        == ["start_programs: 0 != 2"]


@pytest.mark.parametrize("role", ROLES)
def test_play_keeps_an_option_by_its_role(role):
    """``for_play`` resets the options of role "training" (the training games' curricula);
    the "game" and "agent" ones stay; ``agent_env_options`` are the "agent" ones."""
    changed = {option.name: _other_value(option) for option in HACKMATRIX_OPTIONS
               if option.role == role}
    config = TrainConfig(env_options=changed, explore_share=0.1)
    played = config.for_play()
    for name, value in changed.items():
        assert played.env_option(name) == (
            TrainConfig().env_option(name) if role == "training" else value)
    assert set(config.agent_env_options()) == {o.name for o in HACKMATRIX_OPTIONS
                                               if o.role == "agent"}


def _other_value(option: EnvOption):
    other = {"bool": lambda: not option.default, "int": lambda: option.default + 1,
             "float": lambda: 0.25, "str": lambda: "swift", "names": lambda: ("reset",)}
    return other[option.kind]()


def test_a_record_from_before_env_options_reads_back_as_it_ran():
    """A checkpoint written before ``env_options`` holds the options as fields of their own:
    those the env takes move into ``env_options``; one the record lacks takes the value its
    run had (``absent``: UNDO's reward was paid again before ``undo_pays_once``)."""
    record = TrainConfig().to_dict()
    del record["env_options"]
    record.update(reward_shaping="swift", close_undo_exploit=False, start_programs=1,
                  start_programs_pool=["reset"], acquire_macro=True)
    config = TrainConfig.from_dict(record)
    assert config.env_option_values() == {
        **TrainConfig().env_option_values(), "reward_shaping": "swift",
        "close_undo_exploit": False, "start_programs": 1, "start_programs_pool": ("reset",),
        "acquire_macro": True, "undo_pays_once": False}
    toy = {**record, "env": "toy"}  # the toy took none of them: they are dropped
    assert TrainConfig.from_dict(toy).env_options == ()
    assert set(LEGACY_ENV_OPTION_FIELDS) == {option.name for option in HACKMATRIX_OPTIONS}


@pytest.mark.parametrize("options, message", [
    ({"acquire_macro": 1}, "--acquire-macro must be on or off (a boolean), got 1"),
    ({"start_programs_pool": "reset"}, "--start-programs-pool must be a list of names"),
    ({"no_such_option": 1}, "--no-such-option needs an env that takes it (none does)"),
    ({"start_programs": 2, "start_programs_pool": ("reset",)},
     "--env hackmatrix: start_programs (2) is more than the 1 programs of start_programs_pool"),
])
def test_validation_refuses_an_option_in_one_line(options, message):
    with pytest.raises(ConfigError) as error:
        validate_config(TrainConfig(env_options=options))
    assert str(error.value) == message or str(error.value).startswith(message)


def test_the_trainer_names_no_option_of_an_env():
    """``purejaxrl/`` is generic: an env's option names appear in it only where older records
    are read (``LEGACY_ENV_OPTION_FIELDS``); the rules a policy is judged under (HackMatrix's
    R9 loop closed) are the env's own ``JUDGEMENTS``."""
    allowed = {"purejaxrl/config.py": set(LEGACY_ENV_OPTION_FIELDS)}
    for path in sorted((ROOT / "purejaxrl").rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        named = {option.name for option in HACKMATRIX_OPTIONS if option.name in text}
        relative = str(path.relative_to(ROOT))
        assert named <= allowed.get(relative, set()), (relative, named)
    config_text = (ROOT / "purejaxrl" / "config.py").read_text(encoding="utf-8")
    legacy_block = config_text[config_text.index("LEGACY_ENV_OPTION_FIELDS = ("):]
    for option in HACKMATRIX_OPTIONS:  # in config.py, only inside the legacy list
        assert config_text.count(f'"{option.name}"') == legacy_block.count(f'"{option.name}"')
