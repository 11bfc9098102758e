"""scripts/benchmark.py's parts that run no benchmark: --compare matches rows of one
configuration on both sides (which fields make a configuration, a pure function of the rows),
and an option the env cannot take is refused before any work."""

import json
import os

import pytest

from tests.script_harness import load_script


def load_benchmark():
    return load_script("benchmark")


def test_compare_tells_configurations_apart_by_core_and_head_width():
    """Two GRU widths, or two head widths, are two configurations for --compare; a feed-forward
    row's recorded core width (no network of its has one) and a row from before --head-width
    (linear heads) change nothing."""
    module = load_benchmark()
    gru = {"benchmark": "train", "num_envs": 2048, "recurrent_core": "gru", "core_width": 128}
    assert module.config_key(gru) != module.config_key({**gru, "core_width": 256})
    assert module.config_key(gru) != module.config_key({**gru, "head_width": 128})
    assert module.config_key(gru) == module.config_key({**gru, "head_width": 0})
    flat = {"benchmark": "train", "num_envs": 2048, "recurrent_core": "none", "core_width": 256}
    assert module.config_key(flat) == module.config_key({**flat, "core_width": 128})


def test_the_program_digest_changes_with_what_is_computed_only():
    """Two lowerings of one function have one digest (no source locations in the text); a
    changed constant or input shape is another program. --compare reads '-' where a row has no
    digest (env rows, rows from before it)."""
    import jax
    import jax.numpy as jnp
    module = load_benchmark()

    def lowered(scale, shape=(3,)):
        return jax.jit(lambda x: jnp.sin(x) * scale).lower(jnp.zeros(shape))

    digest = module.program_digest(lowered(2.0))
    assert digest == module.program_digest(lowered(2.0)) and len(digest) == 16
    assert digest != module.program_digest(lowered(3.0))
    assert digest != module.program_digest(lowered(2.0, (4,)))
    row = {"program_sha256": digest}
    assert module.same_program(row, dict(row)) == "same"
    assert module.same_program(row, {"program_sha256": "0" * 16}) == "differs"
    assert module.same_program(row, {}) == "-"


def test_the_acquire_macro_is_refused_for_an_env_without_it(capsys):
    """--acquire-macro is HackMatrix's option: with --env toy it is one line and exit 2, before
    anything is measured or written."""
    with pytest.raises(SystemExit) as exit_info:
        load_benchmark().main(["--mode", "env", "--env", "toy", "--num-envs", "2",
                               "--acquire-macro", "--ledger", os.devnull])
    assert exit_info.value.code == 2
    assert "--acquire-macro needs --env hackmatrix" in capsys.readouterr().err


@pytest.mark.parametrize("refused", [["--env", "toy"], ["--mode", "env"],
                                     ["--encoder", "flat"]])
def test_the_exit_distance_view_is_refused_where_it_changes_nothing(refused, capsys):
    """--exit-distance-view changes HackMatrix's network input only: with the toy env, the
    env-only mode or the flat encoder it is one line and exit 2, before anything is measured."""
    argv = ["--mode", "train", "--num-envs", "2", "--exit-distance-view",
            "--ledger", os.devnull] + refused
    with pytest.raises(SystemExit) as exit_info:
        load_benchmark().main(argv)
    assert exit_info.value.code == 2
    assert "--exit-distance-view needs --env hackmatrix" in capsys.readouterr().err


def test_compare_of_compile_only_rows_reads_compile_and_program(tmp_path, capsys):
    """--compile-only rows ran nothing: --compare prints '-' for their steps/s instead of
    failing, and still compares compile time and program."""
    row = {"benchmark": "train-compile", "env": "hackmatrix", "num_envs": 2048, "num_steps": 128,
           "device_count": 1, "num_devices": 1, "trace_lower_s": 1.0, "compile_s": 9.0,
           "program_sha256": "ab" * 8}
    path = tmp_path / "results.jsonl"
    path.write_text(json.dumps({**row, "label": "before"}) + "\n"
                    + json.dumps({**row, "label": "after", "compile_s": 4.0}) + "\n")
    assert load_benchmark().main(["--ledger", str(path), "--compare", "before", "after"]) == 0
    line = [x for x in capsys.readouterr().out.splitlines() if x.startswith("train-compile")][0]
    assert line.split()[-7:] == ["-", "-", "-", "10.00", "5.00", "0.50", "same"]


def test_trainer_defaults_benchmark_the_configuration_the_main_command_trains():
    """--trainer-defaults measures, field for field, what ``train_purejaxrl.py --num-envs 2048``
    trains (HackMatrix's trainer defaults); without it the benchmark's configuration is the one
    its earlier rows measured (Swift's reward, no macro, TrainConfig's fields)."""
    from purejaxrl import ppo
    from purejaxrl.cli import train
    from purejaxrl.config import config_differences
    module = load_benchmark()
    parser = module.build_parser()
    args = train.build_parser().parse_args(["--num-envs", "2048"])
    main = train.config_from_args(args, None, 1, say=lambda *a, **k: None,
                                  env_defaults=ppo.defaults_for_env("hackmatrix"))
    measured = module.train_config(parser.parse_args(["--mode", "train", "--trainer-defaults"]),
                                   2048, 1)
    assert config_differences(measured, main) == []
    plain = module.train_config(parser.parse_args(["--mode", "train"]), 2048, 1)
    assert plain.env_option("reward_shaping") == "swift"
    assert plain.env_option("acquire_macro") is False and plain.training_reward == "progress"
    assert config_differences(plain.with_env_options(reward_shaping="potential"),
                              main.replace(**{name: getattr(plain, name) for name in (
                                  "training_reward", "gamma", "lr_floor")},
                                  env_options={})) == []


def test_trainer_defaults_are_refused_where_nothing_is_trained(capsys):
    """--trainer-defaults is a training configuration: with --mode env (random play, no
    trainer) it is one line and exit 2, before anything is measured or written."""
    with pytest.raises(SystemExit) as exit_info:
        load_benchmark().main(["--mode", "env", "--num-envs", "2", "--trainer-defaults",
                               "--ledger", os.devnull])
    assert exit_info.value.code == 2
    assert "--trainer-defaults is a training configuration" in capsys.readouterr().err
