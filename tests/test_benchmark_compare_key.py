"""scripts/benchmark.py's --compare matches rows of one configuration on both sides: which
fields make a configuration (a pure function of the rows; no benchmark runs)."""

import importlib.util
import os

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCHMARK = os.path.join(REPO_ROOT, "scripts", "benchmark.py")


def test_compare_tells_configurations_apart_by_core_and_head_width():
    """Two GRU widths, or two head widths, are two configurations for --compare; a feed-forward
    row's recorded core width (no network of its has one) and a row from before --head-width
    (linear heads) change nothing."""
    spec = importlib.util.spec_from_file_location("benchmark_script", BENCHMARK)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    gru = {"benchmark": "train", "num_envs": 2048, "recurrent_core": "gru", "core_width": 128}
    assert module.config_key(gru) != module.config_key({**gru, "core_width": 256})
    assert module.config_key(gru) != module.config_key({**gru, "head_width": 128})
    assert module.config_key(gru) == module.config_key({**gru, "head_width": 0})
    flat = {"benchmark": "train", "num_envs": 2048, "recurrent_core": "none", "core_width": 256}
    assert module.config_key(flat) == module.config_key({**flat, "core_width": 128})
