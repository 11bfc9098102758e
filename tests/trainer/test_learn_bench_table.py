"""The learning benchmark's summary table, from ledger rows alone (no training): the honest
judgement shown, the stages reached, and what each seed cost."""
from purejaxrl.learning_benchmark import (honest, ledger_overview, ledger_stage_overview,
                                          summary_table)


def test_the_summary_table_shows_the_closed_loop_judgement_and_stage_reach():
    """A row with both judgements is shown with the loop closed (its wins are the honest
    ones), R9 completions from the parity judgement beside it; rows older than the closed
    judgement fall back to the parity one."""
    stages = [{"stage": k, "reached": r} for k, r in zip(range(1, 9),
                                                          (1, .9, .5, .25, .1, .05, .02, .01))]

    def summary(win, r9):
        return {"stage_mean": 4.0, "win_rate": win, "undo_exploit_completions_per_episode": r9,
                "stages": stages}
    row = {"seed": 0, "eval": {m: summary(0.15, 0.9) for m in ("greedy", "sampled")},
           "eval_closed": {m: summary(0.01, 0.0) for m in ("greedy", "sampled")}}
    shown = honest(row)["greedy"]
    assert shown["win_rate"] == 0.01 and shown["undo_exploit_completions_per_episode"] == 0.9
    old_row = {"seed": 1, "eval": {m: summary(0.2, 0.0) for m in ("greedy", "sampled")}}
    assert honest(old_row)["greedy"]["win_rate"] == 0.2
    table = summary_table([row, old_row], {"heuristic": summary(0.0, 0.0)})
    header, seed0 = table.splitlines()[:2]
    assert ">=2" in header and ">=8" in header
    assert "0.010" in seed0 and "0.150" not in seed0 and seed0.rstrip().endswith("1.0%")


def test_the_summary_table_ends_with_what_each_seed_cost():
    """Throughput is part of a result: each seed's env steps, hours of training and env
    steps/s close the table (rows without the figures, older ones, are left out)."""
    judged = {m: {"stage_mean": 4.0} for m in ("greedy", "sampled")}
    timed = {"seed": 0, "eval": judged, "env_steps": 20_000_000, "train_seconds": 1800.0,
             "sps": 20_000_000 / 1800, "compile_seconds": 25.4, "seeds_in_program": 1}
    untimed = {"seed": 1, "eval": judged}
    last = summary_table([timed, untimed], {}).splitlines()[-1]
    assert last == ("seed 0: 20.0M env steps in 0.50 h of training, 11,111 env steps/s, "
                    "compile 25 s")


def overview_rows():
    """A ledger of two labels in the standard tier (one judged only with the loop open, as
    rows older than the closed judgement are), one in the full tier, and the baselines."""
    def judged(stage, win, reach6=None):
        summary = {"stage_mean": stage, "win_rate": win, "programs_per_episode": 0.5}
        if reach6 is not None:
            summary["stages"] = [{"stage": 6, "reached": reach6}]
        return summary

    def seed(label, tier, number, stage, win, closed=True):
        both = {m: judged(stage, win, 0.25) for m in ("greedy", "sampled")}
        row = {"label": label, "tier": tier, "kind": "seed", "seed": number, "backend": "cpu",
               "eval_episodes": 512, "sps": 10_000.0, "train_seconds": 1800.0, "eval": both}
        return {**row, "eval_closed": both} if closed else row

    heuristic = {"label": "a", "tier": "standard", "kind": "baseline", "policy": "heuristic",
                 "eval_episodes": 512, "eval": judged(3.71, 0.0), "eval_closed": judged(3.71, 0.0)}
    return [heuristic, seed("a", "standard", 2, 4.77, 0.0), seed("a", "standard", 0, 4.72, 0.0),
            seed("a", "standard", 1, 4.78, 2 / 512), seed("old", "standard", 0, 4.70, 0.154,
                                                          closed=False),
            seed("long-one", "full", 0, 5.10, 0.0)]


def test_the_ledger_overview_shows_every_seed_the_median_and_the_baselines():
    """Every seed's greedy stage in seed order, never the best alone, with the median and
    honest win counts; a label judged only with R9's loop open says so; the tier's baselines
    close its group; --tier keeps one tier."""
    table = ledger_overview(overview_rows())
    lines = table.splitlines()
    line_a = next(line for line in lines if line.startswith("a "))
    assert "4.72 4.78 4.77" in line_a and " 4.77 " in line_a and "0 2 0" in line_a
    assert line_a.rstrip().endswith("closed") and "25.0%" in line_a and "0.50" in line_a
    assert next(line for line in lines if line.startswith("old ")).rstrip().endswith("open")
    assert lines.index(next(line for line in lines if line.startswith("(heuristic)"))) < \
        lines.index(next(line for line in lines if line.startswith("full tier")))
    only_full = ledger_overview(overview_rows(), "full")
    assert "long-one" in only_full and "standard" not in only_full
    assert ledger_overview(overview_rows(), "long") == "no seed rows in the long tier"


def test_the_overview_prints_every_label_whole():
    """Two configurations whose labels share their first 40 characters are two lines that
    differ, each label printed whole, the columns after it aligned with the header."""
    stem = "acquire-macro-reset-startreset-lrfloor02-"
    rows = [row for row in overview_rows() if row["tier"] == "full"]
    rows = [{**rows[0], "label": stem + "full"}, {**rows[0], "label": stem + "full-rerun"}]
    lines = ledger_overview(rows).splitlines()
    header = next(line for line in lines if line.startswith("label"))
    full = next(line for line in lines if line.startswith(stem + "full "))
    rerun = next(line for line in lines if line.startswith(stem + "full-rerun "))
    assert len(header) == len(full) == len(rerun)
    assert header.index("seeds") + len("seeds") == full.index(" 1 ") + len(" 1")


def test_the_stage_overview_shows_each_stage_clear_rate_as_the_median_over_seeds():
    """--overview --by-stage: per label, every stage's greedy clear rate (%) as the median over
    its seeds (from the closed-loop judgement), then the median honest win rate; the tier's
    baselines close the group; a label without per-stage reports is left out and counted."""
    def judged(clears, win):
        stages = [{"stage": k, "reached": 1.0, "clear_rate": c} for k, c in enumerate(clears, 1)]
        return {"stage_mean": 3.0, "win_rate": win, "stages": stages}

    def seed(label, number, clears, win):
        both = {m: judged(clears, win) for m in ("greedy", "sampled")}
        parity = {m: judged((0.0, 0.0, 0.0), 0.9) for m in ("greedy", "sampled")}
        return {"label": label, "tier": "full", "kind": "seed", "seed": number,
                "eval": parity, "eval_closed": both}
    rows = [seed("early", 0, (1.0, 0.9, 0.2), 0.0), seed("early", 1, (0.9, 0.7, 0.4), 0.02),
            seed("early", 2, (0.8, 0.8, None), 0.01),
            {"label": "old", "tier": "full", "kind": "seed", "seed": 0,
             "eval": {m: {"stage_mean": 4.0} for m in ("greedy", "sampled")}},
            {"label": "early", "tier": "full", "kind": "baseline", "policy": "heuristic",
             "eval": judged((1.0, 0.5, 0.25), 0.0)}]
    lines = ledger_stage_overview(rows).splitlines()
    header = next(line for line in lines if line.startswith("label"))
    assert header.split()[1:] == ["seeds", "st1", "st2", "st3", "wins"]
    assert next(line for line in lines if line.startswith("early ")).split() == \
        ["early", "3", "90", "80", "30", "1.0"]
    assert next(line for line in lines if line.startswith("(heuristic)")).split() == \
        ["(heuristic)", "100", "50", "25", "0.0"]
    assert not any(line.startswith("old ") for line in lines)
    assert "(1 label(s) of this tier have no per-stage report)" in lines
    assert ledger_stage_overview(rows, "long") == \
        "no seed rows with a per-stage report in the long tier"


def test_the_overview_prints_every_seed_and_every_win_count_whole():
    """Five seeds winning hundreds of games each: every seed's stage and win count is printed
    whole (the columns widen, the header and the baselines with them), none cut mid-number."""
    base = next(row for row in overview_rows() if row["kind"] == "seed")
    wins = (190, 201, 215, 230, 236)
    seeds = [{**base, "seed": s, "label": "many",
              "eval_closed": {m: {"stage_mean": 6.0 + s / 100, "win_rate": w / 512}
                              for m in ("greedy", "sampled")}}
             for s, w in enumerate(wins)]
    heuristic = next(row for row in overview_rows() if row.get("policy") == "heuristic")
    lines = ledger_overview([heuristic, *seeds]).splitlines()
    header = next(line for line in lines if line.startswith("label"))
    line = next(line for line in lines if line.startswith("many "))
    assert "6.00 6.01 6.02 6.03 6.04" in line and "190 201 215 230 236" in line
    assert len(header) == len(line)
    baseline = next(line for line in lines if line.startswith("(heuristic)"))
    assert baseline.index("3.71") + len("3.71") == header.index("median") + len("median")


def test_a_seed_with_two_rows_is_one_seed_of_the_overview():
    """A seed written twice (a vmapped program resumed before duplicates were refused) counts
    once, by its newest row: the seed count and the median are the label's."""
    rows = overview_rows()
    again = {**next(row for row in rows if row["kind"] == "seed" and row["label"] == "a"
                    and row["seed"] == 0)}
    lines = ledger_overview(rows + [again]).splitlines()
    line_a = next(line for line in lines if line.startswith("a "))
    assert line_a.split()[1] == "3" and "4.72 4.78 4.77" in line_a


def test_the_overview_names_another_envs_baselines():
    """A tier holding a CartPole label too (``-- --env CartPole-v1``): each env's baselines are
    its own lines, the other env's named, so CartPole's random return never stands as
    HackMatrix's random stage."""
    rows = overview_rows()
    cartpole = {"label": "cartpole", "tier": "standard", "kind": "baseline", "policy": "random",
                "env": "CartPole-v1", "eval_episodes": 512, "eval": {"return_mean": 22.3}}
    lines = ledger_overview(rows + [cartpole]).splitlines()
    assert any(line.startswith("(heuristic) ") and "3.71" in line for line in lines)
    assert any(line.startswith("(random, CartPole-v1) ") and "22.30" in line for line in lines)
    assert not any(line.startswith("(random) ") for line in lines)
