"""The trainer on gymnax envs by id (issue 28): PureJaxRL's configs are their defaults (a flag
given wins), a tiny CartPole-v1 run (MLP) and Breakout-MinAtar run (CNN) train and log return
and length and nothing of HackMatrix's, and watch_agent plays their checkpoints (text; a GIF of
MinAtar's images)."""


import imageio.v3 as iio
import pytest

from purejaxrl import ppo
from purejaxrl.config import GYMNAX_IMAGE_DEFAULTS, GYMNAX_VECTOR_DEFAULTS
from purejaxrl.train import train
from tests.script_harness import load_script
from tests.trainer.toy_run import options

HACKMATRIX_KEYS = ("episode/win_rate", "episode/stage_mean", "actions/invalid",
                   "undo_exploit_completions", "progress/steps_per_stage")


def test_a_gymnax_env_starts_from_purejaxrls_config_and_our_envs_from_trainconfig():
    """CartPole-v1: PureJaxRL's purejaxrl/ppo.py config (4 envs x 128 steps, 500k steps,
    lr 2.5e-4, 4 epochs x 4 minibatches, 64x2 tanh, separate actor and critic, clipped value
    loss); a MinAtar env: its MinAtar config (64 envs, 10M steps, lr 5e-3, 8 minibatches,
    relu) with the CNN; a field given explicitly wins; the toy keeps TrainConfig's defaults
    (HackMatrix's own: test_trainer_defaults.py)."""
    cartpole = ppo.config_for_env("CartPole-v1")
    assert (cartpole.num_envs, cartpole.num_steps, cartpole.total_timesteps, cartpole.lr,
            cartpole.update_epochs, cartpole.num_minibatches) == (4, 128, 500_000, 2.5e-4, 4, 4)
    assert (cartpole.hidden_width, cartpole.hidden_depth, cartpole.activation,
            cartpole.separate_torsos, cartpole.clip_value_loss, cartpole.encoder,
            cartpole.training_reward, cartpole.normalize_rewards) == (
                64, 2, "tanh", True, True, "flat", "env", False)
    breakout = ppo.config_for_env("Breakout-MinAtar", lr=1e-3)
    assert (breakout.encoder, breakout.activation, breakout.num_envs,
            breakout.num_minibatches, breakout.lr) == ("cnn", "relu", 64, 8, 1e-3)
    assert GYMNAX_IMAGE_DEFAULTS["lr"] == 5e-3 and GYMNAX_VECTOR_DEFAULTS["lr"] == 2.5e-4
    assert ppo.defaults_for_env("toy") == {}


@pytest.fixture(scope="module")
def cartpole_run(tmp_path_factory, compile_cache_dir):
    config = ppo.config_for_env("CartPole-v1", num_steps=32, total_timesteps=2 * 128,
                                hidden_width=16)
    return config, train(config, options(tmp_path_factory.mktemp("cartpole"),
                                         compile_cache_dir, eval_interval=2, eval_envs=4))


def test_cartpole_trains_and_logs_return_and_length_only(cartpole_run):
    _, result = cartpole_run
    record = result.records[-1]
    assert record["episode/count"] > 0 and record["episode/return_mean"] > 5
    assert record["episode/length_mean"] == record["episode/return_mean"]  # +1 per step
    assert record["eval_greedy/return_mean"] > 0 and record["actions/masked_sampled"] == 0
    assert not [key for key in HACKMATRIX_KEYS if key in record]
    assert not [key for key in record if key.startswith(("reward/", "stage_reached/"))]


@pytest.mark.slow  # extended suite (pytest -m slow)
def test_minatar_trains_with_the_cnn(tmp_path, compile_cache_dir):
    config = ppo.config_for_env("Breakout-MinAtar", num_envs=2, num_steps=8,
                                total_timesteps=16, num_minibatches=2, hidden_width=8)
    result = train(config, options(tmp_path, compile_cache_dir))
    assert "ConvEncoder_0" in result.runner_state.params["params"]
    assert result.updates_done == 1 and result.records[-1]["ppo/grad_norm"] > 0


def load_watch_agent():
    """scripts/watch_agent.py as a module (scripts are not a package)."""
    return load_script("watch_agent")


@pytest.mark.parametrize("gif", [False, True])
def test_watch_agent_plays_a_gymnax_checkpoint(cartpole_run, tmp_path, capsys, gif):
    """CartPole: text frames and the summary of return and length; its vector observations
    have no GIF (exit 2, before any episode); HackMatrix-only outputs are refused."""
    watch = load_watch_agent()
    _, result = cartpole_run
    extra = ["--gif", str(tmp_path / "a.gif")] if gif else []
    code = watch.main([result.run_dir, "--episodes", "2", "--max-episode-steps", "30",
                       "--no-compile-cache", *extra])
    out, err = capsys.readouterr()
    if gif:
        assert code == 2 and "--gif needs image observations" in err
        return
    assert code == 0, err
    assert "--- episode 1 step 0 ---" in out and "action " in out
    assert out.splitlines()[-1].startswith("2 episodes: mean return")
    assert watch.main([result.run_dir, "--html", str(tmp_path / "a.html")]) == 2
    assert "HackMatrix only" in capsys.readouterr().err


@pytest.mark.slow  # extended suite (pytest -m slow)
def test_watch_agent_draws_minatar_images_into_a_gif(tmp_path, compile_cache_dir, capsys):
    watch = load_watch_agent()
    config = ppo.config_for_env("Breakout-MinAtar", num_envs=2, num_steps=8,
                                total_timesteps=16, num_minibatches=2, hidden_width=8,
                                encoder="flat")
    result = train(config, options(tmp_path, compile_cache_dir, run_name="breakout"))
    gif = tmp_path / "breakout.gif"
    code = watch.main([result.run_dir, "--max-episode-steps", "5", "--quiet", "--gif", str(gif),
                       "--no-compile-cache"])
    assert code == 0, capsys.readouterr().err
    frames = iio.imread(gif, index=None)
    assert frames.shape == (5, 240, 240, 3)


def test_learning_benchmark_judges_an_env_without_stages_by_return(cartpole_run, tmp_path):
    """The learning benchmark on CartPole: one judgement (no R9 loop to close), the mean
    return as the score (table, seed line, curve), the random policy as the only baseline, and
    none of HackMatrix's columns."""
    from purejaxrl import learning_benchmark

    config, result = cartpole_run
    said = []
    outcome = learning_benchmark.run(
        config, [config.seed], "cartpole", "smoke", "test", options(tmp_path, None), 8,
        str(tmp_path / "ledger.jsonl"), str(tmp_path / "curve.png"),
        lambda c, o, checkpoint: result, say=said.append)
    row = outcome["seeds"][0]
    assert set(learning_benchmark.judgements_for(config)) == {"eval"} and "eval_closed" not in row
    assert set(outcome["baselines"]) == {"random"}
    header = outcome["table"].splitlines()[0].split()
    assert "return" in header and not {"stage", "win", "R9/ep", "siph/ep"} & set(header)
    assert any(line.startswith(f"   seed {config.seed}: greedy return ") for line in said)
    assert row["curve"][-1][1] == result.records[-1]["episode/return_mean"]
    assert (tmp_path / "curve.png").stat().st_size > 0


def test_the_reference_tier_needs_an_env_with_a_published_budget(capsys):
    """learn_bench's tier ``reference`` trains for the env's own budget (no budget of its
    own); HackMatrix has none, so it is refused (exit 2, one line, before anything trains)."""
    learn_bench = load_script("learn_bench")
    assert learn_bench.main(["--tier", "reference", "--no-ledger"]) == 2
    assert capsys.readouterr().err.strip() == (
        "error: --tier reference: hackmatrix has no published budget; use smoke, standard or "
        "full")
    from purejaxrl.learning_benchmark import TIERS
    assert TIERS["reference"].total_timesteps is None


def test_evaluate_says_a_fallen_cartpole_game_terminated(cartpole_run, tmp_path):
    """evaluate.py on CartPole (no won or died metric): a game whose pole fell inside the time
    limit ended "terminated" in the --json games, one that reached it "truncated", never
    "unfinished" (which is a game still running when the evaluation stopped)."""
    import json

    from purejaxrl.cli.evaluate import main as evaluate_main
    _, result = cartpole_run
    path = tmp_path / "cartpole.json"
    assert evaluate_main(["--checkpoint", result.run_dir, "--policies", "random",
                          "--episodes", "8", "--max-episode-steps", "15", "--json",
                          str(path)]) == 0
    games = json.loads(path.read_text())["random"]["games"]
    assert set(games["end"]) <= {"terminated", "truncated"} and "terminated" in games["end"]
    assert all(length == 15 if end == "truncated" else length <= 15
               for end, length in zip(games["end"], games["length"]))
