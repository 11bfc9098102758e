"""Where the trainer's command lines start for an env (``registry.trainer_defaults``): HackMatrix
declares its best configuration, which the main command trains; a config built in code, a
baseline and a checkpoint-less evaluation keep the original game."""

import json
import pathlib

import pytest

from envs import registry
from envs.hackmatrix import options as hackmatrix_options
from purejaxrl import ppo
from purejaxrl.cli import train
from purejaxrl.cli.evaluate import baseline_config, config_without_network
from purejaxrl.cli.parsing import name_list
from purejaxrl.config import ConfigError, TrainConfig, config_differences, validate_config

ROOT = pathlib.Path(__file__).resolve().parents[2]
LEDGER = ROOT / "benchmarks" / "learning" / "ledger.jsonl"
# The configuration SPEC §4.4 reports as the default's full tier.
DEFAULT_FULL_TIER_LABEL = ("acquire-macro-crashpush-startcrashpush-stagecount-gamma999-"
                           "lrfloor02-full")


def quiet(*args, **kwargs):
    pass


def command_config(flags: list[str]) -> TrainConfig:
    """The config ``train_purejaxrl.py FLAGS`` trains (a new run on one device)."""
    args = train.build_parser().parse_args(flags)
    return train.config_from_args(args, None, 1, say=quiet,
                                  env_defaults=ppo.defaults_for_env(args.env or "hackmatrix"))


def test_the_main_command_trains_the_configuration_the_ledger_reports_as_default():
    """README's command (``--num-envs 2048``) trains, field for field and option for option,
    the configuration whose full-tier seeds SPEC §4.4 reports as the default's."""
    rows = [json.loads(line) for line in LEDGER.read_text().splitlines() if line.strip()]
    recorded = [row for row in rows
                if row.get("label") == DEFAULT_FULL_TIER_LABEL and row.get("kind") == "seed"]
    assert recorded, f"no seed of {DEFAULT_FULL_TIER_LABEL} in the ledger"
    main = command_config(["--num-envs", "2048"])
    for row in recorded:
        ran = TrainConfig.from_dict(row["config"]).replace(seed=0)
        assert config_differences(ran, main) == []


def test_hackmatrixs_trainer_defaults_are_its_best_configuration_and_the_toys_are_none():
    main = command_config([])
    assert (main.training_reward, main.gamma, main.lr_floor) == ("stage-count", 0.999, 0.2)
    assert main.agent_env_options()["acquire_macro"] is True
    assert main.env_option("acquire_macro_pool") == ("reset", "crash", "push")
    assert main.env_option("start_programs") == 1
    assert main.env_option("start_programs_pool") == ("reset", "crash", "push")
    assert registry.trainer_defaults("toy") == {} == registry.trainer_defaults("CartPole-v1")
    toy = command_config(["--env", "toy"])
    assert (toy.training_reward, toy.gamma, toy.lr_floor, toy.env_options) == (
        TrainConfig().training_reward, TrainConfig().gamma, TrainConfig().lr_floor, ())


def test_trainer_defaults_name_only_config_fields_and_declared_options_and_are_a_copy():
    fields = set(TrainConfig().to_dict())
    declared = {option.name for option in registry.training_options("hackmatrix")}
    defaults = registry.trainer_defaults("hackmatrix")
    assert set(defaults) - {"env_options"} <= fields
    assert set(defaults["env_options"]) <= declared
    defaults["env_options"]["acquire_macro"] = False
    defaults["gamma"] = 0.5
    assert registry.trainer_defaults("hackmatrix") == hackmatrix_options.TRAINER_DEFAULTS


def test_every_trainer_default_can_be_turned_back_from_the_command_line():
    """The flags that undo each default give the config TrainConfig's defaults build (the
    original game, Swift's reward as the "progress" training reward); ``none`` is the empty
    list of names."""
    back = command_config(["--no-acquire-macro", "--acquire-macro-pool", "none",
                           "--start-programs", "0", "--start-programs-pool", "none",
                           "--training-reward", "progress", "--gamma", "0.995",
                           "--lr-floor", "0"])
    bare = train.config_from_args(train.build_parser().parse_args([]), None, 1, say=quiet)
    assert config_differences(back, bare) == []
    assert name_list("none") == () and name_list("reset,crash") == ("reset", "crash")


def test_code_baselines_and_a_checkpointless_evaluation_play_the_original_game():
    """A TrainConfig built in code has none of the trainer's options; the baselines of a
    default run play without its macro, its policy without the start curriculum; an
    evaluation without a network plays the game's own actions (28)."""
    plain = TrainConfig()
    assert plain.env_option("acquire_macro") is False and plain.env_option("start_programs") == 0
    main = command_config([])
    assert baseline_config(main).env_option("acquire_macro") is False
    assert main.for_play().env_option("start_programs") == 0
    assert main.for_play().env_option("acquire_macro") is True
    without = config_without_network("hackmatrix")
    assert without.env_options == () and without.training_reward == "stage-count"
    env, _ = ppo.make_env(without)
    assert env.num_actions == 28


@pytest.mark.parametrize("fields, expected", [
    ({}, True), ({"env_options": {"start_programs": 0}}, True),
    ({"env_options": {"acquire_macro": False}}, False)])
def test_config_for_env_sets_given_options_over_the_envs_own(fields, expected):
    config = ppo.config_for_env("hackmatrix", **fields)
    assert config.env_option("acquire_macro") is expected
    assert config.env_option("acquire_macro_pool") == ("reset", "crash", "push")


def test_turning_the_anneal_off_drops_the_default_floor_but_never_a_given_one():
    """The floor is where the anneal ends: ``--no-anneal-lr`` on the main command (and
    ``anneal_lr=False`` in code) trains at a constant rate instead of refusing the default
    floor it never asked for; a floor given with it is still refused, naming both flags."""
    constant = command_config(["--no-anneal-lr", "--lr", "1e-4"])
    assert (constant.anneal_lr, constant.lr_floor, constant.lr) == (False, 0.0, 1e-4)
    validate_config(constant)
    assert command_config(["--lr-floor", "0.3"]).lr_floor == 0.3
    in_code = ppo.config_for_env("hackmatrix", anneal_lr=False)
    assert (in_code.anneal_lr, in_code.lr_floor) == (False, 0.0)
    validate_config(in_code)
    with pytest.raises(ConfigError, match="--lr-floor 0.2 .* needs --anneal-lr"):
        validate_config(command_config(["--no-anneal-lr", "--lr-floor", "0.2"]))
