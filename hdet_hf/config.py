"""`HDETConfig`: every HDET setting, its help text and its validation, written once.

`HDETTrainingArguments` turns each field into a `--hdet_<name>` flag (same help text), and the Accelerate
API and the drop-in scheduler take the same dataclass, so the three shells cannot drift apart.
"""

from __future__ import annotations

import functools
import math
import types
import typing
import warnings
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any, NamedTuple

from .probe_sample import PROBE_SAMPLINGS

__all__ = [
    "HDETConfig",
    "GRADIENT_SYNC_MODES",
    "CONTROLLER_UPDATES",
    "TEMPERATURE_MODES",
    "CONTROLLER_SIGNALS",
    "OTHER_HYPERPARAMETERS",
    "BASE_SCHEDULES",
]

GRADIENT_SYNC_MODES = ("local", "shared")
CONTROLLER_UPDATES = ("multiplicative", "additive")
CONTROLLER_TIME_SCALES = ("run", "converge", "vote")
TEMPERATURE_MODES = ("adaptive", "fixed")
CONTROLLER_SIGNALS = (
    "train_loss", "probe", "averaged_probe", "train_and_averaged_probe", "cooldown_probe", "train_and_cooldown_probe"
)
# Hyperparameters besides the LR, each with `<name>_spread` and `<name>_auto` fields.
OTHER_HYPERPARAMETERS = ("weight_decay", "dropout", "label_smoothing", "attention_temperature")
# Those that change a replica only through its gradient (so only `local` mode can explore them).
FORWARD_HYPERPARAMETERS = ("dropout", "label_smoothing", "attention_temperature")
BASE_SCHEDULES = ("one_cycle", "trainer")
CONVERGE_WEIGHTS = ("uniform", "fitness")
# A sync_interval given as a fraction of the run never resolves below this many steps: the controller compares
# replicas on their loss over the interval, and fewer batches make that comparison noise.
MIN_FRACTION_SYNC_INTERVAL = 10
# The start race's length when --hdet_start_race_steps is unset (BENCHMARKS.md readings 45-47: measured at 60).
DEFAULT_START_RACE_STEPS = 60
# The share of the run's global batch each start-race candidate trains on (--hdet_start_race_batch_share), and the start
# and the copy below it that decide a lowering (--hdet_start_race_lower_batch_share): a smaller copy batch favours a
# smaller LR, so each decision is taken on the share where it was measured to help (BENCHMARKS.md items 56-58).
DEFAULT_START_RACE_BATCH_SHARE = 0.5
DEFAULT_START_RACE_LOWER_BATCH_SHARE = 0.25
# Where a start race that raises starts the run: its winner, or the largest candidate that beat the start clearly.
START_RACE_RAISES = ("winner", "largest")
START_RACE_RAISE_ON = ("start_last", "two_steps")
# The comparison horizon of the default (None) in plain shared mode, as a fraction of the run (reading 12).
DEFAULT_COMPARISON_HORIZON = 0.1
# Before the comparison horizon takes over: the step-size fan-out alone, or alternating with the horizon.
EARLY_COMPARISONS = ("lower_of_both", "one_interval")
SIGNAL_COMBINATIONS = ("mean", "agree", "agree_mean")
# When the train-loss vote's adaptive temperature is floored at its noise (`noise_floor`).
NOISE_FLOORS = ("two_replicas", "always", "off")
# Which votes within the noise floor count as no vote (`controller.within_noise`).
ABSTENTIONS = ("off", "raises", "always")


@dataclass
class HDETConfig:
    """Settings of one HDET run. Validated on construction; errors name the flag, the value and the fix.

    Example:
        >>> from hdet_hf import HDETConfig
        >>> config = HDETConfig(lr_spread=0.5, sync_interval=20, auto_lr=True)
        >>> config.lr_spread
        0.5
    """

    lr_spread: float = field(
        default=0.25,
        metadata={
            "help": "Learning-rate spread alpha in [0, 1). Rank r of N runs at base LR x "
            "(1 + alpha*(r-(N-1)/2)/max((N-1)/2, 0.5)); the multipliers average exactly 1. A wider spread "
            "explores farther from the base LR but costs more quality when the base LR is already good; "
            "BENCHMARKS.md measures the cost of each spread."
        },
    )
    sync_interval: float = field(
        default=0.03,
        metadata={
            "help": "Optimizer steps T between converges (parameter averages) and controller updates: an integer "
            ">= 1, or a fraction of the run in (0, 1), rounded and never below 10 steps (nor above the run). "
            "The default 0.03 gives T 10 up to 333 steps and 3 %% of the run beyond (T 60 at 2,000 steps): on "
            "the long task a comparison horizon of 3 %% of the run beat T 10 from every start (BENCHMARKS.md, "
            "section \"The controller\"). Counted in optimizer steps, not micro-batches. Evaluation, saving and "
            "the last step also converge. In 'local' mode T is also the communication period: a longer T "
            "saves communication at a quality cost."
        },
    )
    comparison_horizon: float | None = field(
        default=None,
        metadata={
            "help": "With --hdet_auto_lr in shared mode: how far back the replicas' comparison reaches. 0: one "
            "interval, each replica steps at m_r x the base LR, so it is compared at start + m_r x the "
            "interval's update (a line search over T steps, which favours small LRs more the longer the run). "
            "> 0: every rank steps at the base LR and keeps a discounted sum Z of the ensemble's updates (decay "
            "exp(-T / H)); each replica starts its interval at the average + (1 - decay) x (m_r - 1) x Z, so the "
            "controller compares LRs along the run's direction over about H steps while still deciding every T "
            "(hdet_hf/horizon.py). An integer number of steps >= 1 or a fraction of the run in (0, 1). None (the "
            "default): 0.1 of the run in plain shared mode (whole replicas, plain averaging, one LR), where it was "
            "measured (BENCHMARKS.md, \"The controller\", reading 12), and 0 elsewhere. Keeps two extra copies "
            "of the trainable parameters per process until exploration ends."
        },
    )
    comparison_horizon_start: float = field(
        default=0.3,
        metadata={
            "help": "With a comparison horizon (> 0): where it takes over, an integer step >= 1 or a fraction of "
            "the run in [0, 1); until then replicas are compared as --hdet_early_comparison says. 0: the "
            "horizon from the first converge (the default before session 8). Early in a run the horizon's "
            "comparison asks for a larger LR at every LR, also 3x above the best one; with the default 0.3 "
            "(OneCycle's peak) and 'lower_of_both' a start 3x too high ended better than DDP at that LR on the "
            "1,000-step task (1.064x the sweep's best, was 1.146x; DDP 1.162x), the 2,000-step task (0.995x; "
            "DDP 0.999x) and the fine-tuning task (1.376x; DDP 1.441x), means of 3 seeds, at a cost from 10x "
            "below (about 1 point on the language-model tasks) and on the 300-step task from 3x above (1.056x "
            "on 5 seeds, with 0 1.038x; DDP 1.035x): BENCHMARKS.md, \"The controller\", readings 13 and 14. "
            "Ignored without a horizon."
        },
    )
    early_comparison: str = field(
        default="lower_of_both",
        metadata={
            "help": "How replicas are compared before a later --hdet_comparison_horizon_start. 'lower_of_both': "
            "intervals alternate between the step-size fan-out and the horizon's offsets, and the controller "
            "moves by the lower of the two latest hypergradients, so it raises the LR only when both "
            "comparisons ask for it. 'one_interval': the step-size fan-out only (one-interval comparisons ask "
            "for a smaller LR on long runs and a larger one on short ones). Measured in BENCHMARKS.md, \"The "
            "controller\", reading 13; with the default signal combination 'one_interval' raised a correct LR "
            "1.7-2.4x and a pretrained classifier started 3x too high collapsed (reading 19).",
            "choices": list(EARLY_COMPARISONS),
        },
    )
    lr_fan_out_scale: float = field(
        default=0.4,
        metadata={
            "help": "With a comparison horizon (> 0): how wide the intervals that compare replicas by step size "
            "(before --hdet_comparison_horizon_start) fan out, as a fraction in (0, 1] of --hdet_lr_spread: "
            "rank r steps at 1 + scale x (m_r - 1) times the base LR. The horizon's offsets and the controller's "
            "vote keep the full multipliers m_r (a replica's vote counts as if it had stepped at m_r); the probe's "
            "line search measures at the multipliers actually stepped. Ignored without a horizon. Default since "
            "session 18 (0.4: spread 0.1 at the default 0.25): at a too-high LR the full fan-out itself costs. "
            "From 3x above the best LR it left 5 of 17 runs on six tasks worse than DDP at that LR (all by <= "
            "1.5 points) against 8 (by up to 20 points on a pretrained classifier), at the best LR level; from "
            "10x below 0.2 points worse on the language-model tasks and on one of three classifier seeds 1.869x "
            "the sweep's best instead of 1.567x (BENCHMARKS.md, reading 23). 1: the full spread (before)."
        },
    )
    gradient_sync: str = field(
        default="shared",
        metadata={
            "help": "'shared' (the paper's variant, the default): DDP all-reduces gradients every step and ranks "
            "differ only in step size. 'local': no gradient all-reduce between converges, each rank steps on "
            "its own gradient (communication every T steps only). 'local' is local SGD: it communicates less "
            "but loses quality at equal steps; BENCHMARKS.md compares the two.",
            "choices": list(GRADIENT_SYNC_MODES),
        },
    )
    auto_lr: bool = field(
        default=False,
        metadata={
            "help": "Let the controller move the shared base LR after each converge: ranks with lower loss "
            "get more softmax weight, and the weighted-minus-plain mean multiplier is the hypergradient."
        },
    )
    auto_lr_warmup_steps: float = field(
        default=0.1,
        metadata={
            "help": "Steps before the controller starts moving the base LR: an integer >= 1, or a fraction "
            "of the total optimizer steps in [0, 1). The spread applies from the first step regardless."
        },
    )
    controller_temperature: float = field(
        default=1.0,
        metadata={
            "help": "Softmax temperature sigma for the loss weights softmax((mean_loss - loss_r)/sigma). "
            "With --hdet_controller_temperature_mode adaptive it is in units of the replicas' loss standard "
            "deviation; with 'fixed' in loss units (the paper's loss_scale, 0.002)."
        },
    )
    controller_temperature_mode: str = field(
        default="adaptive",
        metadata={
            "help": "'adaptive': sigma is multiplied by the standard deviation of the replica losses at each "
            "converge, so the weights do not depend on the loss's scale. 'fixed': sigma as given (paper).",
            "choices": list(TEMPERATURE_MODES),
        },
    )
    controller_noise_floor: str = field(
        default="two_replicas",
        metadata={
            "help": "Floor the adaptive temperature of the train-loss vote at that loss's noise (the standard "
            "deviation of a replica's window mean, from its optimizer steps' losses): a gap between replicas "
            "within twice the noise gives a proportionally smaller vote instead of a full-size one. "
            "'two_replicas' (default): with exactly two replicas (processes or HSDP replica groups), where two "
            "standardised losses are always -1 and +1 and every vote would be full-size; 'always': with any "
            "number (at 4 processes a gain on one task from 10x below, none on four others: readings 32-33); 'off': never (the votes before session 27). "
            "The probe's vote is not floored (its paired noise is far below its gaps: reading 33). Only with --hdet_controller_temperature_mode adaptive. "
            "Default since session 27: at 2 processes on 3 seeds a pretrained classifier from 3x above its best LR "
            "ended 1.374x the sweep's best (was 1.585x; DDP there 1.211x) and at the best LR 1.076x (was 1.030x), "
            "a language-model task from 10x below 1.034x (was 1.061x) (BENCHMARKS.md, reading 32).",
            "choices": list(NOISE_FLOORS),
        },
    )
    controller_abstain_within_noise: str = field(
        default="raises",
        metadata={
            "help": "Where a vote is floored at its noise (--hdet_controller_noise_floor), what a gap within that "
            "noise (the floor binds: the replicas' spread is below the noise) votes. 'off': a smaller vote, in "
            "proportion to the gap (session 27). 'raises': no vote (0) where it asks for a raise, a smaller one "
            "where it asks for a cut: the probe is biased towards longer steps, so its raise needs a clear train-loss "
            "vote to pass --hdet_controller_signal_combination agree_mean, while its cut goes against its bias. "
            "'always': no vote in either direction. With agree or agree_mean a row without a vote makes the "
            "controller hold (the line search may still break the tie). Default since session 28 ('raises'): at 2 "
            "processes on 3 seeds a pretrained classifier at its best LR ended 0.972x the sweep's best (was 1.076x) "
            "and from 3x above 1.212x (was 1.374x; DDP there 1.211x); a language-model task from 10x below 1.020x "
            "(was 1.034x); a 120-step classifier at its best LR 1.000x (was 0.965x) (BENCHMARKS.md, reading 33).",
            "choices": list(ABSTENTIONS),
        },
    )
    controller_lr: float = field(
        default=1.5,
        metadata={
            "help": "Controller step size lambda (the paper's lr_of_lr). The default suits the multiplicative "
            "update (chosen in BENCHMARKS.md); the paper's additive update uses LR units (e.g. 0.01)."
        },
    )
    controller_momentum: float = field(
        default=0.5,
        metadata={"help": "Controller momentum beta in [0, 1) (the paper's momentum_of_lr, 0.9)."},
    )
    controller_update: str = field(
        default="multiplicative",
        metadata={
            "help": "'multiplicative': log(scale) += lambda*v with delta measured on log multipliers, so the "
            "base LR can never reach zero. 'additive': the paper's base += lambda*v in LR units "
            "(clamped to the allowed range).",
            "choices": list(CONTROLLER_UPDATES),
        },
    )
    controller_time_scale: str = field(
        default="vote",
        metadata={
            "help": "How the controller's moves scale when --hdet_sync_interval T is shorter than the default interval "
            "(0.03 of the run, at least 10 steps; at the default T or longer all three are the same). 'vote' (default "
            "since session 33): the controller votes once per default interval (every k-th converge, k = T_default "
            "/ T rounded) on the replicas' losses summed over all k windows (and, with an averaged probe, at each "
            "replica's mean weights over the same steps: session 35), with the multipliers held; the converges "
            "between only average (or, in step-size intervals, keep the replicas apart: "
            "--hdet_keep_fan_out_between_votes). 'run' (session 32): a vote at every converge, each moving lambda x "
            "T / T_default with momentum beta ^ (T / T_default). 'converge': a full lambda and beta at every converge (before "
            "session 32). In a 2,000-step drop-in run with T 10 (3 seeds; 'converge' 2), a start 10-30x below the "
            "sweep's best LR ended 1.055 / 1.123 / 1.453x the sweep's best loss (1.038x with the fan-out kept between "
            "votes, the default since session 34; T 60: 1.031) and starts near the best 1.001-1.007 / 1.001-1.006 / "
            "1.022-1.062x (BENCHMARKS.md, readings 37-39).",
            "choices": list(CONTROLLER_TIME_SCALES),
        },
    )
    keep_fan_out_between_votes: bool = field(
        default=True,
        metadata={
            "help": "With --hdet_controller_time_scale vote and votes every k > 1 converges: in a step-size interval "
            "with shared gradients, where the replicas differ only by their step sizes along one path, the "
            "converges between votes exchange the replicas' statistics (the divergence guard still resets a "
            "diverged replica to the average) but leave each replica where it is, so the vote compares step "
            "sizes over its whole window, not over the last T steps. Offset intervals (the comparison horizon) "
            "and local mode average as before. Default since session 34: in a 2,000-step drop-in run with T 10 "
            "(2 processes, 3 seeds) a start 10-30x below the sweep's best LR ended 1.038x (was 1.055x; "
            "T 60: 1.031x) (BENCHMARKS.md, reading 39). --no_hdet_keep_fan_out_between_votes averages at every "
            "converge (session 33)."
        },
    )
    controller_raise_gain: float = field(
        default=2.0,
        metadata={
            "help": "Multiplicative update only: a move that raises the base LR is this many times lambda. "
            "From a too-low LR the climb is rate-limited (at most ~1.26x per converge at lambda 1.5, "
            "spread 0.25, 4 replicas), so a start 10x too low stays far below the best LR past the "
            "schedule's peak. 2 reached the sweep's loss from 10x below on the 300-step task (1.003x) and left "
            "runs that only lower the LR unchanged; where the controller raises the LR from every start "
            "(a pretrained classifier) it also raises more at the best LR (BENCHMARKS.md, reading 15). 3 climbed "
            "faster still, but a classifier run started 3x too high fell to 0.40 accuracy (reading 19). 1 "
            "moves both ways alike (the paper)."
        },
    )
    controller_two_replica_cut_gain: float = field(
        default=0.5,
        metadata={
            "help": "Multiplicative update only, with exactly two replicas (processes or HSDP replica groups): a "
            "move that lowers the base LR is this many times lambda (raises keep --hdet_controller_raise_gain). Two "
            "standardised scores always vote full-size, so at 2 replicas a move was about twice a 4-replica one "
            "(median 0.15-0.195 against 0.08-0.13 on eight tasks) and a cut that passed was a full cut. With 0.5 "
            "(default since session 30), of 48 runs at 2 processes at the best LR and from 3x above, 24 ended "
            "better, 4 worse (by at most 0.8 points), 20 the same (BENCHMARKS.md, reading 35). 1 cuts as with 3+ "
            "replicas; 3+ replicas are unchanged."
        },
    )
    controller_signal_combination: str = field(
        default="agree_mean",
        metadata={
            "help": "How a two-score --hdet_controller_signal (train_and_*) makes one hypergradient. "
            "'agree_mean' (default): the controller moves only when the train loss and the probe ask for the "
            "same direction, by the mean of the two; when they disagree it holds. The train loss is biased "
            "towards too-small steps and the probe towards too-large ones, so the right LR lies between what "
            "they ask for: at the sweep's best LR they disagree at most converges, from a too-low LR both ask "
            "for more. At the best LR it ended 0.992 / 1.006 / 1.047 / 0.999x the sweep's best on four tasks "
            "(the mean: 0.994 / 1.009 / 1.122 / 1.012x); from 10x below and 3x above within a point of the mean "
            "on the language-model tasks, worse on the pretrained classifier (2.30 / 1.48x against 1.91 / 1.42x; "
            "BENCHMARKS.md, reading 18). 'mean': the mean of "
            "the two (the default until session 13). 'agree': as 'agree_mean', but a move is the smaller of "
            "the two (slower from a too-low LR). Ignored by one-score signals; it applies to every explored "
            "hyperparameter's controller alike.",
            "choices": list(SIGNAL_COMBINATIONS),
        },
    )
    controller_floor_after_peak: bool = field(
        default=True,
        metadata={
            "help": "Once the base LR schedule has started to decay and the early phase is over "
            "(--hdet_comparison_horizon_start; on OneCycle both at 30 %% of the run), the controller may still "
            "raise the LR and take such raises back, but does not lower it below the factor it had then. A "
            "too-high LR does its damage before the peak; after it, a cut gives up progress the schedule's "
            "decay would have kept (BENCHMARKS.md, readings 16 and 21). Default since session 16: from 3x "
            "above the best LR it ended below the previous default on 11 of 13 seeds of four tasks and within "
            "0.1 points on the other two (the held-out task: 1.000x the sweep's best instead of 1.020x), and "
            "at the best LR and from 10x below the same or better. --no_hdet_controller_floor_after_peak "
            "(or HDETConfig(controller_floor_after_peak=False)) brings back cuts for the whole exploration."
        },
    )
    controller_line_search_threshold: float = field(
        default=4.0,
        metadata={
            "help": "Far below the right LR, let the probe's line search size a raise: a quadratic fit of the "
            "replicas' probe losses against their multipliers gives the multiple m* of the current LR that the "
            "probe would step. When a raise passes the controller's checks and m* was >= this threshold at "
            "this converge and the previous one, the raise is at least min(m*/threshold, "
            "--hdet_controller_line_search_max_raise). 0 = off. Needs a probe signal (train_and_*, probe, "
            "averaged_probe) and >= 3 replicas (2 with --hdet_controller_line_search_centre); otherwise it does "
            "nothing. Default since session 17: at the "
            "best LR m* stayed below 4 on five tasks, 10x below it was 4 to infinite early in the run. From "
            "10x below it ended 1.671x the sweep's best on the pretrained classifier (was 2.295x, 3 seeds) and "
            "1.036x on a held-out task (1.048x), 1.007x on the 300-step task (1.001x, 5 seeds); at the best LR "
            "and from 3x above every run measured was bit-identical (BENCHMARKS.md, reading 22)."
        },
    )
    controller_line_search_max_raise: float = field(
        default=4.0,
        metadata={
            "help": "The largest factor one line-search raise may take (--hdet_controller_line_search_threshold); "
            "> 1. Bounds a move when the probe's line has no curvature to measure (m* infinite), so it sets how "
            "fast a run far below the right LR climbs (at most this factor per converge, up to "
            "--hdet_controller_max_factor). It differs from 2 only where m* > 2 x threshold. Default 4 since "
            "session 20 (was 2): from 10x below the held-out 120-step classifier ended 1.378x the sweep's best "
            "on 3 seeds (was 1.918x) and the 200-step classifier 1.101x (1.169x; there the 10x bound is the "
            "best LR; with a 30x bound it overshoots and ends 1.200x); the 300-step task 1.016x (1.010x, 5 "
            "seeds, within its noise); every other run measured was bit-identical (BENCHMARKS.md, reading 25). "
            "--hdet_controller_line_search_max_raise 2 restores the previous behaviour."
        },
    )
    controller_line_search_breaks_ties: bool = field(
        default=True,
        metadata={
            "help": "When the controller's checks leave the LR where it is (the gated hypergradient is exactly 0: "
            "the two scores, or the two kinds of early interval, disagree) and the probe's line search put the "
            "optimum at or beyond --hdet_controller_line_search_threshold at this converge and the previous one, "
            "raise by min(m*/threshold, --hdet_controller_line_search_max_raise) anyway. A vote to lower the LR "
            "still wins. Off: the line search only sizes raises the votes passed. Does nothing with the line "
            "search off. Default since session 19: from 10x below the pretrained classifier ended 1.169x the "
            "sweep's best on 3 seeds (was 1.773x), where its train loss and probe disagreed for four converges "
            "while the line stayed straight; every other run measured was bit-identical (BENCHMARKS.md, "
            "reading 24). --no_hdet_controller_line_search_breaks_ties turns it off."
        },
    )
    controller_line_search_centre: bool = field(
        default=True,
        metadata={
            "help": "With two replicas (processes; HSDP replica groups have no comparison horizon), give the line search "
            "(--hdet_controller_line_search_threshold) its third point: each replica rebuilds the centre of the "
            "line the two lie on (multiplier 1) from its own weights and scores it on the probe batch too (one "
            "more forward per converge, no extra communication). Needs shared gradients, the comparison horizon "
            "(its anchor is where a step-size interval started), a probe scored without a cool-down and the LR as "
            "the only value spread across replicas; does "
            "nothing with three or more replicas, which fit a line of their own. Default since session 26 "
            "(BENCHMARKS.md, reading 31). --no_hdet_controller_line_search_centre turns it off (2 replicas then "
            "climb by the controller's votes alone)."
        },
    )
    controller_line_search_until_bend: bool = field(
        default=True,
        metadata={
            "help": "With the rebuilt centre (--hdet_controller_line_search_centre, two replicas), the line search "
            "raises only in the climb from the start of the run: the first converge whose fitted optimum is below "
            "--hdet_controller_line_search_threshold ends it for the run. Three points fitted exactly leave no "
            "residual to show noise; on the 200-step classifier at its best LR a line that looked straight twice "
            "after the peak raised an LR the votes had already taken to 3x by another 3.3x, and the run diverged "
            "(BENCHMARKS.md, reading 32). Does nothing with three or more replicas. "
            "--no_hdet_controller_line_search_until_bend lets it act at any converge.",
        },
    )
    controller_max_factor: float = field(
        default=10.0,
        metadata={
            "help": "The controller keeps the base LR within [schedule/f, schedule*f] of the configured "
            "schedule; f > 1."
        },
    )
    start_race_steps: int | None = field(
        default=None,
        metadata={
            "help": "With --hdet_auto_lr (HDETTrainer): before the first step, the replicas train copies of the "
            "initial weights for this many steps each at 4 constant LRs, the peak LR x f ** (c / 3) for c = 0..3 (f: "
            "--hdet_controller_max_factor; with 2 replicas each races two, one after the other), all on the same "
            "batches of one replica's batch of the run (--per_device_train_batch_size x "
            "--gradient_accumulation_steps examples a step, in micro-batches of the per-device size; no loss "
            "scaling; groups of processes train each copy together, each on its replica's batch, so a candidate trains "
            "on --hdet_start_race_batch_share of the global batch, half by default, and the start and the copy below "
            "it on --hdet_start_race_lower_batch_share, a quarter), "
            "and score each copy on the probe batch. The run keeps its initial weights and raises the "
            "controller's start when every larger LR beat the start, the probe loss fell with each step up in LR "
            "to the winner, the winner beat the start by --hdet_start_race_significance paired standard errors, "
            "and a copy one step below the start (x 0.464) did worse than the start: to the largest candidate "
            "that beat the start by as many standard errors (--hdet_start_race_raise_to); "
            "when it does not raise, it may lower the start one step (--hdet_start_race_lowers). A race from the "
            "initial weights favours small steps, so it raises only on that evidence and lowers only on a start "
            "that stalled (BENCHMARKS.md, readings 43, 45-49). Costs ceil(4 / G) + ceil(2 / G') rounds of this many "
            "steps per process at the start (G, G' the copies raced side by side on each share: by default 3 rounds "
            "at any process count, the last on a quarter of the global batch; with the two shares equal, ceil(5 / G) "
            "rounds; with --hdet_start_race_lowers false the pair races only when the rest would raise). Unset "
            "(default): "
            f"{DEFAULT_START_RACE_STEPS} steps where the race can run (--hdet_auto_lr, whole replicas, 2+ processes, "
            f"a sized train set) on runs of at least {2 * DEFAULT_START_RACE_STEPS} steps, else none; a number races "
            "that long (an error where it cannot); 0: no race."
        },
    )
    start_race_lowers: bool | None = field(
        default=None,
        metadata={
            "help": "Whether the start race may also lower the start LR one step (x 0.464) when it did not raise: "
            "a copy one step below the start is raced too (by the race's first group of processes, or by an idle "
            "group when the groups leave one), and the run starts there when that copy beat the start by "
            "--hdet_start_race_significance paired standard errors and removed at least three times as much probe loss "
            "from the initial weights' as the start's copy did, and itself removed at least a tenth of that loss and "
            "beat the initial weights by as many standard errors (a start past the edge of stability stalls or "
            "collapses; a smaller LR's short-horizon edge is small; on a pretrained model every copy at a constant LR "
            "may first lose ground, reading 54). After a lowering the controller never raises the LR above the "
            "lowered start. Unset (default): wherever the race runs; false: the race only raises; true: "
            "as unset, and an error where no race can run. Costs one more race copy: ceil(5 / G) instead of "
            "ceil(4 / G) x the race's steps per process (G: the race's groups, --hdet_start_race_steps; BENCHMARKS.md, "
            "readings 47 and 48)."
        },
    )
    start_race_raise_to: str = field(
        default="largest",
        metadata={
            "help": "Where a start race that raises starts the run: 'largest' (default), the largest candidate LR "
            "that beat the start by --hdet_start_race_significance paired standard errors (at least the winner's), "
            "or 'winner', the candidate with the lowest probe loss (the default before session 44). A race from the "
            "initial weights favours small steps, so where every candidate beat the start its winner is a lower "
            "bound on the right LR; it raises only where the start came last of all candidates, so a larger "
            "candidate that fails (a collapse past the edge of stability) stops any raise (BENCHMARKS.md readings "
            "43 and 49).",
            "choices": list(START_RACE_RAISES),
        },
    )
    start_race_raise_on: str = field(
        default="two_steps",
        metadata={
            "help": "What evidence lets the start race raise the start: 'two_steps' (default since session 46), "
            "every larger candidate beat the start, or the probe loss fell with each step up from the start "
            "through at least two candidates (x 4.64) while a larger one did worse (past the edge of stability a "
            "larger copy stalls or collapses); 'start_last', only the first (the rule before). Both keep the other "
            "gates (the winner --hdet_start_race_significance standard errors ahead, the copy below the start "
            "behind it). It changed 14 of 241 recorded races, all from below the best LR, and ended lower on "
            "each measured run (BENCHMARKS.md, reading 51).",
            "choices": list(START_RACE_RAISE_ON),
        },
    )
    start_race_stall_ceiling: bool | None = field(
        default=None,
        metadata={
            "help": "Whether the controller's raises stop below the first start-race candidate LR whose copy "
            "stalled (removed less than half the probe loss the start's copy removed from the initial weights': "
            "past the edge of stability): the race saw that LR fail. Without it the controller's climb from a few "
            "times below the best LR took a LoRA classifier to the race's collapsed LR (3.3x the sweep's best loss), "
            "and from half the best LR left a run worse than DDP at that LR. It binds only where a copy stalled (the "
            "pretrained classifiers, not the from-scratch language models): on 10 measured classifier runs from "
            "0.2-0.5x the best LR, mean -0.031 (lower on 5, higher on 5 by up to 0.055; the one run worse than DDP "
            "at its start LR, 1.316, ended 1.048). Not applied where the cap would be the start itself (the first "
            "step up stalled: at the classifiers' best LR a cap at 1 cost +0.012 on 3 runs). Unset (default since "
            "session 47): wherever the race runs; false: no cap; true: as unset, and an error where no race can run "
            "(BENCHMARKS.md, readings 51-52)."
        },
    )
    start_race_significance: float = field(
        default=2.0,
        metadata={
            "help": "How many standard errors (paired over the probe batch's examples) the start race's winner "
            "must beat the start LR by before the race raises the start (and, with --hdet_start_race_raise_to "
            "largest, how far a larger candidate must be ahead of the start for the raise to go to it)."
        },
    )
    start_race_probe_size: int | None = field(
        default=None,
        metadata={
            "help": "Examples the start race scores its copies on (HDETTrainer; chosen as the shared probe's, by "
            "--hdet_probe_sampling): its decisions are paired tests over these examples, made once per run, so "
            "they can afford more than the controller's --hdet_probe_size. Unset: 128, or, where the probe comes "
            "from the train set (no eval set), at most a quarter of it and no fewer than --hdet_probe_size, so the "
            "race keeps examples to train on. With 32, a pretrained classifier's start that collapsed from 3x above "
            "its best LR was not told apart from the copy below it (1.7 standard errors; BENCHMARKS.md reading 56). "
            "Scored one example at a time."
        },
    )
    start_race_batch_share: float = field(
        default=DEFAULT_START_RACE_BATCH_SHARE,
        metadata={
            "help": "The share of the run's global batch each start-race candidate (the start and the LRs above it: "
            "the copies that decide a raise) trains on (HDETTrainer), in (0, 1]: floor(N x share) of the N processes "
            "train each copy together, each on its replica's batch, their gradients averaged; below one process's "
            "batch each process races alone on that share of its batch. A copy's batch sets how noisy its steps are, "
            "and a smaller batch favours a smaller LR. 0.5 (default since session 56): on half the batch at 4 "
            "processes the race raised three starts 10x below the best LR of two from-scratch language models that "
            "a quarter left there (2.9-3.2 points lower at the end; BENCHMARKS.md items 56 and 58). From one "
            "process's batch up a copy takes whole processes' batches (at 3 processes half is a third; an INFO line "
            "says so). A hand-written loop's race (OneCycleAutoLR.start_race, HDETAccelerate.start_race) trains on "
            "the batches it is given: pass half the global batch a step as train_batches and a quarter as "
            "lower_train_batches for this race (README, \"Custom loops with Accelerate\")."
        },
    )
    start_race_lower_batch_share: float = field(
        default=DEFAULT_START_RACE_LOWER_BATCH_SHARE,
        metadata={
            "help": "The share of the run's global batch the start race's lowering pair trains on (HDETTrainer), in "
            "(0, 1]: a copy at the start LR and one a step below it, which decide a lowering and confirm a raise "
            "(the copy below must do worse than the start). 0.25 (default since session 56): on a quarter a "
            "pretrained classifier's copy 3x above its best LR stalls, and the race lowers it, where on half it "
            "still learned and the race left it (2-46 points higher at the end; BENCHMARKS.md items 56-58). Set it "
            "to --hdet_start_race_batch_share for one race on one share (the start's copy then serves both "
            "decisions: one copy fewer). Where the shares differ the pair races after the candidates: "
            "ceil(4 / G) + ceil(2 / G') rounds of --hdet_start_race_steps steps (G, G' the copies raced side by "
            "side on each share). A hand-written loop's race takes the pair's batches as lower_train_batches."
        },
    )
    lr_groups: bool = field(
        default=False,
        metadata={
            "help": "Explore the LR per parameter group: embeddings, no_decay (biases, norms), attention and "
            "rest, each with its own base LR trajectory and permutation (HDETTrainer builds these groups)."
        },
    )
    weight_decay_spread: float = field(
        default=0.0,
        metadata={
            "help": "Spread in [0, 1) of weight decay around --weight_decay (decaying param groups only)."
        },
    )
    weight_decay_auto: bool = field(
        default=False, metadata={"help": "Let the controller move the base weight decay (>= 0)."}
    )
    dropout_spread: float = field(
        default=0.0,
        metadata={
            "help": "Spread in [0, 1) of the model's dropout probabilities (nn.Dropout modules and attention "
            "dropout attributes), relative to each site's configured value."
        },
    )
    dropout_auto: bool = field(default=False, metadata={"help": "Let the controller move the base dropout."})
    dropout_base: float = field(
        default=0.0,
        metadata={
            "help": "If > 0, set every dropout site to this probability before exploring (for models whose "
            "configured dropout is 0). 0 keeps the model's own values."
        },
    )
    label_smoothing_spread: float = field(
        default=0.0,
        metadata={"help": "Spread in [0, 1) of label smoothing around --label_smoothing_factor."},
    )
    label_smoothing_auto: bool = field(
        default=False, metadata={"help": "Let the controller move the base label smoothing (in [0, 1))."}
    )
    attention_temperature_spread: float = field(
        default=0.0,
        metadata={
            "help": "Spread in [0, 1) of a temperature dividing the attention logits (base 1). Supported for "
            "models whose attention modules expose `scaling` (Llama-family, GPT-2)."
        },
    )
    attention_temperature_auto: bool = field(
        default=False, metadata={"help": "Let the controller move the base attention temperature (> 0)."}
    )
    seed: int = field(
        default=0,
        metadata={
            "help": "Seed of the permutations that reassign multipliers at each converge. A private "
            "generator, identical on every rank; the global RNG is never touched."
        },
    )
    controller_signal: str = field(
        default="train_and_averaged_probe",
        metadata={
            "help": "What the controller compares (BENCHMARKS.md compares the signals and shows where each "
            "misses). 'train_loss': each rank's per-token mean training loss since the last "
            "converge (the paper; replicas see different data, so the comparison is noisy). 'probe': every "
            "replica is scored on one shared probe batch just before the converge, a paired comparison "
            "(HDETTrainer takes it from the eval set, else the train set; costs one forward per converge). "
            "'averaged_probe': like 'probe', but each replica is scored at the average of its own weights over "
            "the interval (iterate averaging stands in for the LR cool-down that the end of the run applies; "
            "costs one copy of the trainable parameters, kept in each rank's checkpoint for exact resume, and one "
            "in-place update per step while a controller explores). "
            "'train_and_averaged_probe': the mean of the two hypergradients: the train loss favours too-small "
            "steps (the noise that the final cool-down removes counts against a larger LR) and the averaged "
            "probe too-large ones (it removes that noise but, in shared mode, a replica does not follow its own "
            "gradient, so its instability does not show). "
            "'cooldown_probe': each replica first takes --hdet_cooldown_steps steps of a linear LR cool-down on "
            "copies of its weights and optimizer state (its own gradients, the same batches on every rank), "
            "then is scored on the probe batch; meant to estimate the loss its run would end at, it asks for "
            "too small an LR in BENCHMARKS.md (costs "
            "--hdet_cooldown_steps forward/backward passes and one copy of the weights and optimizer state per "
            "converge; HDETTrainer only). 'train_and_cooldown_probe': the mean of the train-loss and cool-down "
            "hypergradients.",
            "choices": list(CONTROLLER_SIGNALS),
        },
    )
    averaged_probe_share: float = field(
        default=1.0,
        metadata={
            "help": "How much of each vote's window the 'averaged_probe' signals average a replica's weights over, "
            "counted back from the vote, in (0, 1]: 1 (the default) the whole window, 1/3 its last third "
            "(rounded to whole steps, at least one). A shorter mean keeps more of the last iterate's noise, "
            "which counts against longer steps: it turns the averaged probe's bias from long steps toward "
            "short ones (BENCHMARKS.md, readings 41-42: 0.33 helped every task from 3x above, cost d and the "
            "classifiers from 10x below; not the default)."
        },
    )
    probe_size: int = field(
        default=32,
        metadata={"help": "Examples in the shared probe batch of the probe-based --hdet_controller_signal values."},
    )
    probe_sampling: str = field(
        default="spread",
        metadata={
            "help": "Which examples of the eval set (else the train set) form the shared probe batch that scores the "
            "replicas and the start race's copies: 'spread' (default since session 50), --hdet_probe_size examples "
            "(the race's: --hdet_start_race_probe_size) evenly spaced over the dataset; 'first', its first "
            "--hdet_probe_size (the rule before). An ordered "
            "dataset (a causal-LM set of consecutive blocks, sorted files or labels) puts one document or class first: "
            "on a pretrained LM fine-tuned on code the first 32 blocks were one source file whose loss rose at the "
            "best LR while that of blocks spread over the set fell, and on a label-sorted classification set they "
            "were one class (BENCHMARKS.md reading 55). Examples the probe takes from the train set "
            "are left out of the race's and cool-downs' batches.",
            "choices": list(PROBE_SAMPLINGS),
        },
    )
    cooldown_steps: int = field(
        default=4,
        metadata={
            "help": "Steps of the LR cool-down that the cool-down --hdet_controller_signal values take on "
            "copies of each replica before scoring it (LR x (n - i) / (n + 1), i = 0..n-1)."
        },
    )
    cooldown_batch_size: int = field(
        default=0,
        metadata={
            "help": "Examples per cool-down step of the cool-down --hdet_controller_signal values (0: as many "
            "as --hdet_probe_size). Small batches make a cool-down add noise instead of removing it."
        },
    )
    cooldown_lr: str = field(
        default="base",
        metadata={
            "help": "Where the cool-down of the cool-down --hdet_controller_signal values starts: 'base' (every "
            "replica cools down from the shared base LR, so only where the interval left it differs) or "
            "'replica' (from its own LR, base x its multiplier).",
            "choices": ["base", "replica"],
        },
    )
    explore_until: float = field(
        default=0.5,
        metadata={
            "help": "Where exploration ends: a fraction of the run in (0, 1], or an integer step >= 1. From "
            "there on the controller stops moving the base values and every spread is 0, so the rest of the "
            "run is plain data-parallel training on the base schedule found so far (in shared mode exactly "
            "DDP). The default 0.5 ends exploration halfway: the replicas' scores separate good from bad LRs "
            "around the schedule's peak, and late controller moves did harm (BENCHMARKS.md, section \"The "
            "controller\"); on a warm-up/stable/decay schedule too, where exploring the whole plateau (0.8) was "
            "worse from a too-high LR (reading 20). 1 explores to the last step (the paper)."
        },
    )
    sync_warmup_steps: float = field(
        default=0.0,
        metadata={
            "help": "Local mode only: for the first steps (an integer >= 1, or a fraction of the run in [0, 1)) "
            "gradients are all-reduced every step as in DDP (post-local SGD), before replicas train on their "
            "own. 0 disables it."
        },
    )
    divergence_factor: float = field(
        default=10.0,
        metadata={
            "help": "A replica whose mean loss since the last converge exceeds this factor times the ensemble's "
            "mean loss at the previous converge (and the ensemble's mean at the first converge, so that "
            "near-zero losses do not trip it) counts as diverged, like a non-finite loss or parameter: it "
            "is left out of the average, reset to it, and its multiplier is scored worst. 0 disables the "
            "loss test (non-finite values are always caught)."
        },
    )
    outer_lr: float = field(
        default=1.0,
        metadata={
            "help": "Outer step size at each regular converge (DiLoCo's outer SGD on anchor - average, anchor = "
            "the previous converge's parameters). 1 with --hdet_outer_momentum 0 is plain averaging (default)."
        },
    )
    outer_momentum: float = field(
        default=0.0,
        metadata={
            "help": "Nesterov momentum of the outer step in [0, 1) (DiLoCo uses 0.9 with --hdet_outer_lr 0.7). "
            "Keeps two extra copies of the parameters per process."
        },
    )
    average_optimizer_state: bool = field(
        default=False,
        metadata={
            "help": "Also average floating-point optimizer state (e.g. Adam moments) at each converge. "
            "Off by default: each rank keeps the moments of its own trajectory."
        },
    )
    bucket_size_mb: float = field(
        default=256.0,
        metadata={
            "help": "Size cap of the flat buffer of one converge all-reduce, in MiB. A model larger than "
            "this is averaged in several buckets, so the converge costs at most this much extra memory."
        },
    )
    base_schedule: str = field(
        default="one_cycle",
        metadata={
            "help": "HDETTrainer only. 'one_cycle': the base LR follows OneCycle (peak --learning_rate, warm-up "
            "from --warmup_steps/--warmup_ratio or 30%%, div 25, final div 1e4). 'trainer': the schedule "
            "of --lr_scheduler_type. The controller acts as a bounded multiplicative correction on top.",
            "choices": list(BASE_SCHEDULES),
        },
    )
    converge_weights: str = field(
        default="uniform",
        metadata={
            "help": "How replicas enter a converge's average. 'uniform' (default): the plain mean. 'fitness': "
            "while a controller explores, each regular converge weights replica r by exp(-z_r), z_r its score's "
            "distance above the ensemble's in units of the controller's temperature (x the scores' std in "
            "adaptive mode) at the previous converge, clipped to +-3: a soft PBT exploit that pulls the shared "
            "weights toward the replicas that did best, in the same single all-reduce. BENCHMARKS.md measures it.",
            "choices": list(CONVERGE_WEIGHTS),
        },
    )
    hsdp_shard_size: int = field(
        default=0,
        metadata={
            "help": "HSDP: shard each replica over this many processes with FSDP2 (one ensemble member per "
            "replica group of N processes; the world size must be a multiple of N, e.g. 8 for one group per "
            "8-GPU node). 'shared' mode all-reduces gradients across groups every step (HSDP), 'local' mode "
            "only reduce-scatters inside a group. 0 (default): no sharding, every process holds a whole replica."
        },
    )

    def __post_init__(self) -> None:
        for name, kind in _field_kinds(type(self)).items():
            value = getattr(self, name)
            if value is None and kind.optional:
                continue
            if kind.base is bool and not isinstance(value, bool):
                raise ValueError(f"{_flag(name)} must be true or false, but got {value!r}.")
            if kind.base in (float, int) and (isinstance(value, bool) or not isinstance(value, (int, float))):
                raise ValueError(f"{_flag(name)} must be a number, but got {value!r}.")
        _check_choice("gradient_sync", self.gradient_sync, GRADIENT_SYNC_MODES)
        _check_choice("controller_update", self.controller_update, CONTROLLER_UPDATES)
        _check_choice("controller_time_scale", self.controller_time_scale, CONTROLLER_TIME_SCALES)
        _check_choice("controller_signal_combination", self.controller_signal_combination, SIGNAL_COMBINATIONS)
        _check_choice("controller_temperature_mode", self.controller_temperature_mode, TEMPERATURE_MODES)
        _check_choice("controller_noise_floor", self.controller_noise_floor, NOISE_FLOORS)
        _check_choice("controller_abstain_within_noise", self.controller_abstain_within_noise, ABSTENTIONS)
        _check_choice("base_schedule", self.base_schedule, BASE_SCHEDULES)
        _check_choice("controller_signal", self.controller_signal, CONTROLLER_SIGNALS)
        _check_choice("converge_weights", self.converge_weights, CONVERGE_WEIGHTS)
        if not (math.isfinite(self.averaged_probe_share) and 0.0 < self.averaged_probe_share <= 1.0):
            raise ValueError(
                f"{_flag('averaged_probe_share')} must be in (0, 1], but got {self.averaged_probe_share!r}: it is the "
                f"share of each vote's window that the averaged probe averages. Use e.g. {_flag('averaged_probe_share')} "
                "0.33 (its last third) or 1 (the whole window)."
            )
        _check_choice("probe_sampling", self.probe_sampling, PROBE_SAMPLINGS)
        _check_int_at_least("probe_size", self.probe_size, 1)
        _check_int_at_least("cooldown_steps", self.cooldown_steps, 1)
        _check_choice("cooldown_lr", self.cooldown_lr, ("base", "replica"))
        _check_int_at_least("cooldown_batch_size", self.cooldown_batch_size, 0, "0: --hdet_probe_size")
        if not (isinstance(self.lr_spread, (int, float)) and 0.0 <= self.lr_spread < 1.0):
            raise ValueError(
                f"{_flag('lr_spread')} must be in [0, 1), but got {self.lr_spread!r}: multipliers are "
                "1 - spread .. 1 + spread, so spread >= 1 gives a rank a zero or negative LR. "
                f"Use e.g. {_flag('lr_spread')} 0.25."
            )
        interval = self.sync_interval
        if not (0 < interval < 1 or (interval >= 1 and float(interval).is_integer() and math.isfinite(interval))):
            raise ValueError(
                f"{_flag('sync_interval')} must be a whole number of optimizer steps >= 1 or a fraction of the "
                f"run in (0, 1), but got {interval!r}. Use e.g. {_flag('sync_interval')} 10, or 0.03 for 3 % "
                "of the run."
            )
        if interval >= 1:
            self.sync_interval = int(interval)  # "--hdet_sync_interval 20" parses as 20.0
        for name in OTHER_HYPERPARAMETERS:
            spread = getattr(self, f"{name}_spread")
            if not (isinstance(spread, (int, float)) and 0.0 <= spread < 1.0):
                raise ValueError(
                    f"{_flag(name + '_spread')} must be in [0, 1), but got {spread!r}: multipliers are "
                    f"1 - spread .. 1 + spread. Use e.g. {_flag(name + '_spread')} 0.5."
                )
            if getattr(self, f"{name}_auto") and spread == 0:
                raise ValueError(
                    f"{_flag(name + '_auto')} needs {_flag(name + '_spread')} > 0 to measure a hypergradient; "
                    f"set e.g. {_flag(name + '_spread')} 0.5."
                )
        if not 0.0 <= self.dropout_base < 1.0:
            raise ValueError(f"{_flag('dropout_base')} must be in [0, 1), but got {self.dropout_base!r}.")
        if self.gradient_sync == "shared":
            # Dropout, label smoothing and attention temperature act on a replica only through its gradient,
            # which shared mode averages over all ranks every step: the replicas never differ in them, and
            # each rank's training loss would only measure the forward-time cost of its own value.
            # The LR and (decoupled) weight decay act in each rank's optimizer step, so they do differ.
            through_gradient = [
                name for name in FORWARD_HYPERPARAMETERS if getattr(self, f"{name}_spread") > 0
            ]
            if through_gradient:
                flags = ", ".join(_flag(name + "_spread") for name in through_gradient)
                raise ValueError(
                    f"{flags} {'needs' if len(through_gradient) == 1 else 'need'} {_flag('gradient_sync')} local: {_flag('gradient_sync')} shared (the default) "
                    "all-reduces gradients every step, which averages away what these hyperparameters change "
                    "in each replica, so there would be nothing to compare. Add "
                    f"{_flag('gradient_sync')} local (only the LR and weight decay can be explored in shared mode)."
                )
        until = self.explore_until
        if not (isinstance(until, (int, float)) and math.isfinite(until) and until > 0) or (
            until > 1 and until != int(until)
        ):
            raise ValueError(
                f"{_flag('explore_until')} must be a fraction of the run in (0, 1] or an integer step >= 1, but "
                f"got {until!r}. Use e.g. 0.8, or 1 to explore to the end."
            )
        for name in ("auto_lr_warmup_steps", "sync_warmup_steps", "comparison_horizon_start"):
            warmup = getattr(self, name)
            if not (isinstance(warmup, (int, float)) and math.isfinite(warmup) and warmup >= 0) or (
                warmup >= 1 and warmup != int(warmup)
            ):
                raise ValueError(
                    f"{_flag(name)} must be an integer number of steps >= 1 or a fraction of the "
                    f"run in [0, 1), but got {warmup!r}. Use e.g. 200 or 0.1."
                )
        if self.sync_warmup_steps > 0 and self.gradient_sync == "shared":
            warnings.warn(
                f"{_flag('sync_warmup_steps')} has no effect with {_flag('gradient_sync')} shared: gradients are "
                "already all-reduced every step.",
                stacklevel=3,
            )
        if self.start_race_steps is not None and (
            not isinstance(self.start_race_steps, int) or self.start_race_steps < 0
        ):
            raise ValueError(
                f"{_flag('start_race_steps')} must be an integer >= 0 (0: no race; unset: the default), but got "
                f"{self.start_race_steps!r}."
            )
        if self.start_race_probe_size is not None:
            _check_int_at_least(
                "start_race_probe_size", self.start_race_probe_size, 2, "the race's tests need a standard error"
            )
        for name, default in (
            ("start_race_batch_share", DEFAULT_START_RACE_BATCH_SHARE),
            ("start_race_lower_batch_share", DEFAULT_START_RACE_LOWER_BATCH_SHARE),
        ):
            share = getattr(self, name)
            if not (isinstance(share, (int, float)) and not isinstance(share, bool) and 0.0 < share <= 1.0):
                raise ValueError(
                    f"{_flag(name)} is the share of the global batch a start-race copy trains on, in (0, 1], but got "
                    f"{share!r}. Use e.g. {default} (the default) or 0.25."
                )
        if not (math.isfinite(self.start_race_significance) and self.start_race_significance >= 0):
            raise ValueError(
                f"{_flag('start_race_significance')} must be a finite number >= 0, but got "
                f"{self.start_race_significance!r}. Use e.g. 2."
            )
        if self.start_race_steps and not self.auto_lr:
            raise ValueError(
                f"{_flag('start_race_steps')} sets where the auto-LR controller starts, but {_flag('auto_lr')} is "
                f"off. Add {_flag('auto_lr')}, or drop {_flag('start_race_steps')}."
            )
        # Unset lowers wherever the race runs; set to true it must have a race to lower through.
        if self.start_race_lowers and (self.start_race_steps == 0 or not self.auto_lr or self.hsdp_shard_size > 0):
            why, fix = (
                (f"{_flag('auto_lr')} is off", f"add {_flag('auto_lr')}")
                if not self.auto_lr
                else (f"{_flag('start_race_steps')} is 0 (no race)", f"leave {_flag('start_race_steps')} unset")
                if self.start_race_steps == 0
                else (
                    f"{_flag('hsdp_shard_size')} shards the replicas (no race)",
                    f"drop {_flag('hsdp_shard_size')}",
                )
            )
            raise ValueError(
                f"{_flag('start_race_lowers')} lets the start race lower the start LR, but {why}. Drop "
                f"{_flag('start_race_lowers')}, or {fix}."
            )
        if self.start_race_stall_ceiling and (self.start_race_steps == 0 or not self.auto_lr or self.hsdp_shard_size > 0):
            raise ValueError(
                f"{_flag('start_race_stall_ceiling')} caps the controller where the start race saw a copy stall, but "
                f"this run has no race ({_flag('auto_lr')} off, {_flag('start_race_steps')} 0 or "
                f"{_flag('hsdp_shard_size')} set). Drop {_flag('start_race_stall_ceiling')}."
            )
        if self.start_race_steps and self.hsdp_shard_size > 0:
            raise ValueError(
                f"{_flag('start_race_steps')} races whole replicas, one per process; with "
                f"{_flag('hsdp_shard_size')} each replica is sharded over a group. Drop one of the two."
            )
        if self.auto_lr and self.lr_spread == 0:
            raise ValueError(
                f"{_flag('auto_lr')} needs a spread to measure a hypergradient, but {_flag('lr_spread')} is 0: "
                f"every rank would run the same LR. Set {_flag('lr_spread')} to e.g. 0.25, or drop "
                f"{_flag('auto_lr')}."
            )
        if not (math.isfinite(self.lr_fan_out_scale) and 0.0 < self.lr_fan_out_scale <= 1.0):
            raise ValueError(
                f"{_flag('lr_fan_out_scale')} must be in (0, 1], but got {self.lr_fan_out_scale!r}: it narrows the "
                f"step-size intervals' spread to this fraction of {_flag('lr_spread')} (1 = the full spread). "
                f"Use e.g. {_flag('lr_fan_out_scale')} 0.4."
            )
        if not (math.isfinite(self.controller_temperature) and self.controller_temperature > 0):
            raise ValueError(
                f"{_flag('controller_temperature')} must be a positive finite number, but got "
                f"{self.controller_temperature!r}: it divides the loss differences in the softmax. "
                "Use e.g. 1.0 (adaptive mode) or 0.002 (fixed mode, the paper's value)."
            )
        if not (math.isfinite(self.controller_lr) and self.controller_lr >= 0):
            raise ValueError(
                f"{_flag('controller_lr')} must be >= 0, but got {self.controller_lr!r}. Use e.g. 1.5; 0 freezes "
                "the base LR."
            )
        if not 0.0 <= self.controller_momentum < 1.0:
            raise ValueError(
                f"{_flag('controller_momentum')} must be in [0, 1), but got {self.controller_momentum!r}: "
                "at 1 the velocity never takes in a new measurement. Use e.g. 0.5."
            )
        if not (math.isfinite(self.controller_raise_gain) and self.controller_raise_gain >= 1.0):
            raise ValueError(
                f"{_flag('controller_raise_gain')} must be a finite number >= 1, but got "
                f"{self.controller_raise_gain!r}: it multiplies lambda for moves that raise the base LR. Use 2 "
                "(the default) or 1 to move both ways alike."
            )
        if not (math.isfinite(self.controller_two_replica_cut_gain) and 0.0 < self.controller_two_replica_cut_gain <= 1.0):
            raise ValueError(
                f"{_flag('controller_two_replica_cut_gain')} must be a number in (0, 1], but got "
                f"{self.controller_two_replica_cut_gain!r}: with two replicas it multiplies lambda for moves that "
                "lower the base LR. Use 0.5 (the default) or 1 to cut as with more replicas."
            )
        if not (math.isfinite(self.controller_line_search_threshold) and self.controller_line_search_threshold >= 0):
            raise ValueError(
                f"{_flag('controller_line_search_threshold')} must be a finite number >= 0 (0 = off), but got "
                f"{self.controller_line_search_threshold!r}"
            )
        if not (
            math.isfinite(self.controller_line_search_max_raise) and self.controller_line_search_max_raise > 1.0
        ):
            raise ValueError(
                f"{_flag('controller_line_search_max_raise')} must be a finite number > 1, but got "
                f"{self.controller_line_search_max_raise!r}"
            )
        if not (math.isfinite(self.controller_max_factor) and self.controller_max_factor > 1.0):
            raise ValueError(
                f"{_flag('controller_max_factor')} must be a finite number > 1, but got "
                f"{self.controller_max_factor!r}. Use e.g. 10 to let the controller move the LR 10x either way."
            )
        if not (
            math.isfinite(self.divergence_factor)
            and (self.divergence_factor == 0 or self.divergence_factor > 1)
        ):
            raise ValueError(
                f"{_flag('divergence_factor')} must be 0 (off) or a finite number > 1, but got "
                f"{self.divergence_factor!r}: at <= 1 an ordinary replica would count as diverged. Use e.g. 10."
            )
        if not (math.isfinite(self.outer_lr) and self.outer_lr > 0):
            raise ValueError(
                f"{_flag('outer_lr')} must be a positive finite number, but got {self.outer_lr!r}. Use 1 for "
                "plain averaging or e.g. 0.7 (DiLoCo)."
            )
        if not 0.0 <= self.outer_momentum < 1.0:
            raise ValueError(
                f"{_flag('outer_momentum')} must be in [0, 1), but got {self.outer_momentum!r}. Use 0 for plain "
                "averaging or e.g. 0.9 (DiLoCo)."
            )
        if self.start_race_raise_on not in START_RACE_RAISE_ON:
            raise ValueError(
                f"{_flag('start_race_raise_on')} must be one of {', '.join(START_RACE_RAISE_ON)}, but got "
                f"{self.start_race_raise_on!r}."
            )
        if self.start_race_raise_to not in START_RACE_RAISES:
            raise ValueError(
                f"{_flag('start_race_raise_to')} must be one of {', '.join(START_RACE_RAISES)}, but got "
                f"{self.start_race_raise_to!r}."
            )
        if self.early_comparison not in EARLY_COMPARISONS:
            raise ValueError(
                f"{_flag('early_comparison')} must be one of {', '.join(EARLY_COMPARISONS)}, but got "
                f"{self.early_comparison!r}."
            )
        horizon = self.comparison_horizon
        if horizon is not None and not (
            isinstance(horizon, (int, float)) and not isinstance(horizon, bool) and math.isfinite(horizon)
            and horizon >= 0 and (horizon < 1 or horizon == int(horizon))
        ):
            raise ValueError(
                f"{_flag('comparison_horizon')} must be 0 (one interval), a fraction of the run in (0, 1) or an "
                f"integer number of steps >= 1, but got {horizon!r}. Use e.g. 0.1, or leave it unset."
            )
        if horizon is not None and horizon > 0:
            conflicts = [
                f"{_flag('gradient_sync')} local" if self.gradient_sync == "local" else "",
                f"{_flag('hsdp_shard_size')} {self.hsdp_shard_size}" if self.hsdp_shard_size > 0 else "",
                f"{_flag('outer_lr')}/{_flag('outer_momentum')}" if (self.outer_lr, self.outer_momentum) != (1.0, 0.0) else "",
                # One offset per replica follows one LR's multipliers: per-group LRs would get no signal.
                f"{_flag('lr_groups')}" if self.lr_groups else "",
            ]
            conflicts = [c for c in conflicts if c]
            if not self.auto_lr:
                raise ValueError(
                    f"{_flag('comparison_horizon')} {horizon} changes how the LR controller compares replicas, but "
                    f"{_flag('auto_lr')} is off. Add {_flag('auto_lr')}, or leave {_flag('comparison_horizon')} unset."
                )
            if conflicts:
                raise ValueError(
                    f"{_flag('comparison_horizon')} is only supported in plain shared mode (whole replicas, plain "
                    f"averaging, one LR), not with {', '.join(conflicts)}: in local mode and in HSDP groups the "
                    "replicas follow their own gradients, the outer step keeps its own anchor, and one offset per "
                    f"replica cannot carry several LRs' multipliers. Use {_flag('comparison_horizon')} 0 there."
                )
        if not (math.isfinite(self.bucket_size_mb) and self.bucket_size_mb > 0):
            raise ValueError(
                f"{_flag('bucket_size_mb')} must be > 0 MiB and finite, but got {self.bucket_size_mb!r}: it is "
                f"the size of a buffer that is allocated. Use e.g. {_flag('bucket_size_mb')} 256."
            )
        if not (isinstance(self.hsdp_shard_size, int) and not isinstance(self.hsdp_shard_size, bool)
                and self.hsdp_shard_size >= 0):
            raise ValueError(
                f"{_flag('hsdp_shard_size')} must be an integer >= 0, but got {self.hsdp_shard_size!r}. Use 0 "
                f"for whole replicas, or the processes per replica group (e.g. {_flag('hsdp_shard_size')} 8)."
            )
        if self.converge_weights == "fitness" and self.hsdp_shard_size > 0:
            raise ValueError(
                f"{_flag('converge_weights')} fitness is not supported with {_flag('hsdp_shard_size')} yet (a "
                "replica group's shards would need one weight for the group). Use "
                f"{_flag('converge_weights')} uniform with HSDP."
            )
        # The permutation generator takes 64-bit seeds; a larger one fails only inside train().
        if not (isinstance(self.seed, int) and not isinstance(self.seed, bool) and -(2**63) <= self.seed < 2**63):
            raise ValueError(
                f"{_flag('seed')} must be an integer in [-2**63, 2**63), but got {self.seed!r}. Use e.g. "
                f"{_flag('seed')} 0."
            )
        if self.sync_interval == 1:
            warnings.warn(
                f"{_flag('sync_interval')} 1 averages parameters after every step: replicas never diverge, so "
                "this costs a parameter all-reduce every step (as much as DDP's gradient all-reduce) and explores "
                "little.",
                stacklevel=3,
            )

    def resolve_sync_interval(self, total_steps: int) -> int:
        """T in optimizer steps for a run of ``total_steps``: the integer as given, or the fraction of the run,
        rounded, at least ``MIN_FRACTION_SYNC_INTERVAL`` steps (the controller's window loss needs a few
        batches) and at most the run."""
        if self.sync_interval >= 1:
            return int(self.sync_interval)
        steps = max(int(round(self.sync_interval * total_steps)), MIN_FRACTION_SYNC_INTERVAL)
        return max(min(steps, total_steps), 1)

    def controller_interval_share(self, total_steps: int) -> float:
        """The controller's interval (T, or with ``controller_time_scale="vote"`` the steps between votes) over the
        default interval (`sync_interval`'s default resolved for ``total_steps``), at most 1: the share of its
        per-interval lambda that one vote takes (1 with "converge"). 1 wherever T is the default's or longer."""
        # k converges of T / T_default each (k is 1 wherever T is the default's or longer, and that share 1).
        return min(1.0, self.converges_per_vote(total_steps) * self.converge_share(total_steps))

    def converge_share(self, total_steps: int) -> float:
        """T over the default interval, at most 1 (1 with ``controller_time_scale="converge"``): how much closer
        than at the default interval one T's update puts the replicas (`horizon.HorizonOffsets` widens by it)."""
        if self.controller_time_scale == "converge":
            return 1.0
        return min(1.0, self.resolve_sync_interval(total_steps) / self.default_sync_interval(total_steps))

    def converges_per_vote(self, total_steps: int) -> int:
        """How many converges one controller vote spans: with ``controller_time_scale="vote"`` and T shorter than
        the default interval, the default interval's length in T's (rounded, at least 1); else 1."""
        if self.controller_time_scale != "vote":
            return 1
        interval = self.resolve_sync_interval(total_steps)
        k = max(1, round(self.default_sync_interval(total_steps) / interval))
        # Fewer converges per vote where k of them would leave no vote between the controller's warm-up and the
        # end of exploration (a short run): the controller must get to vote at all, before the last step (a move
        # there changes nothing that trains).
        first = max(self.resolve_warmup_steps(total_steps), 1)
        last = min(self.resolve_explore_until(total_steps), total_steps - 1)
        while k > 1 and last // (k * interval) * (k * interval) < first:
            k -= 1
        return k

    def default_sync_interval(self, total_steps: int) -> int:
        """The T that ``sync_interval``'s default (0.03 of the run, at least 10 steps) gives for ``total_steps``."""
        return replace(self, sync_interval=type(self).sync_interval).resolve_sync_interval(total_steps)

    def for_run(self, total_steps: int) -> HDETConfig:
        """This configuration with every run-length-dependent setting that the engine reads as a count
        resolved for ``total_steps`` (``sync_interval``; ``comparison_horizon``'s default resolved by mode), so
        the engine, its checkpoints and the run record all see the values that ran."""
        return replace(
            self,
            sync_interval=self.resolve_sync_interval(total_steps),
            comparison_horizon=self.effective_comparison_horizon,  # None says which by mode: record the value
        )

    @property
    def effective_comparison_horizon(self) -> float:
        """``comparison_horizon`` with None resolved: `DEFAULT_COMPARISON_HORIZON` with the LR controller in plain
        shared mode (whole replicas, plain averaging, one LR), else 0."""
        if self.comparison_horizon is not None:
            return self.comparison_horizon
        plain_shared = (
            self.auto_lr
            and not self.lr_groups
            and self.gradient_sync == "shared"
            and self.hsdp_shard_size == 0
            and (self.outer_lr, self.outer_momentum) == (1.0, 0.0)
        )
        return DEFAULT_COMPARISON_HORIZON if plain_shared else 0.0

    def resolve_comparison_horizon(self, total_steps: int) -> float:
        """The comparison horizon H in optimizer steps (0: off) for a run of ``total_steps``."""
        horizon = self.effective_comparison_horizon
        return float(horizon) if horizon >= 1 or horizon == 0 else horizon * total_steps

    def resolve_warmup_steps(self, total_steps: int, name: str = "auto_lr_warmup_steps") -> int:
        """A warm-up (``auto_lr_warmup_steps``, ``sync_warmup_steps`` or ``comparison_horizon_start``) in optimizer
        steps for ``total_steps``."""
        warmup = getattr(self, name)
        return int(warmup) if warmup >= 1 else int(round(warmup * total_steps))

    def resolve_explore_until(self, total_steps: int) -> int:
        """The step after which exploration stops (``total_steps`` when it never stops)."""
        until = self.explore_until
        return total_steps if until == 1 else int(until) if until > 1 else int(round(until * total_steps))

    def check_run_length(self, total_steps: int) -> None:
        """Refuse settings that cannot work for a run of ``total_steps`` optimizer steps (before any work)."""
        if total_steps < 1:
            raise ValueError(f"Expected positive integer total_steps, but got {total_steps!r}")
        interval = self.resolve_sync_interval(total_steps)
        if interval > total_steps:
            raise ValueError(
                f"{_flag('sync_interval')} {self.sync_interval} is longer than the run ({total_steps} optimizer "
                f"steps): replicas would be averaged only once, at the end. Use {_flag('sync_interval')} "
                f"<= {max(total_steps // 10, 1)} or train longer."
            )
        if self.auto_lr and self.resolve_warmup_steps(total_steps) >= total_steps:
            raise ValueError(
                f"{_flag('auto_lr_warmup_steps')} {self.auto_lr_warmup_steps} ends at or after the last step "
                f"({total_steps}): the controller would never run. Use a fraction such as 0.1, or drop "
                f"{_flag('auto_lr')}."
            )
        # The controller acts at regular converges (multiples of T) from the warm-up's end to exploration's (with
        # controller_time_scale="vote" at every k-th, k small enough that one falls there: `converges_per_vote`).
        until, warmup = self.resolve_explore_until(total_steps), self.resolve_warmup_steps(total_steps)
        last_exploring_converge = until // interval * interval
        if self.auto_lr and until < total_steps and last_exploring_converge < max(warmup, 1):
            raise ValueError(
                f"With {_flag('auto_lr_warmup_steps')} {self.auto_lr_warmup_steps} (step {warmup}), "
                f"{_flag('explore_until')} {self.explore_until} (step {until} of {total_steps}) and "
                f"{_flag('sync_interval')} {self.sync_interval} (T {interval}), no converge falls between the end of the "
                "controller's warm-up and the end of exploration: the controller would never run. Use a shorter "
                f"warm-up, a later {_flag('explore_until')} (1 explores to the last step), a shorter "
                f"{_flag('sync_interval')}, or drop {_flag('auto_lr')}."
            )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def field_names(cls) -> list[str]:
        return [f.name for f in fields(cls)]


class _Kind(NamedTuple):
    base: Any  # the type without None: bool, int, float, str, ...
    optional: bool  # the annotation is `X | None`: None is a valid value (the flag's default when not given)


@functools.cache
def _field_kinds(config: type) -> dict[str, _Kind]:
    """Each field's annotation, resolved (the module uses string annotations) and split into ``X`` and ``| None``."""
    kinds = {}
    for name, hint in typing.get_type_hints(config).items():
        args = typing.get_args(hint) if typing.get_origin(hint) in (typing.Union, types.UnionType) else ()
        rest = [a for a in args if a is not type(None)]
        kinds[name] = _Kind(rest[0], True) if len(rest) == 1 and len(args) == 2 else _Kind(hint, False)
    return kinds


def _flag(name: str) -> str:
    """How a field is spelled for users: the CLI flag (the Python argument drops the prefix)."""
    return f"--hdet_{name}"


def _check_int_at_least(name: str, value: Any, minimum: int, why: str = "") -> None:
    """A whole number (not a bool) of at least ``minimum``; ``why`` says what the bound or a special value means."""
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        what = "a positive integer" if minimum == 1 and not why else f"an integer >= {minimum}"
        raise ValueError(f"{_flag(name)} must be {what}{f' ({why})' if why else ''}, but got {value!r}.")


def _check_choice(name: str, value: Any, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ValueError(f"{_flag(name)} must be one of {', '.join(choices)}, but got {value!r}.")
