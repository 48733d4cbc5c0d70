"""`PeakFloor` (``--hdet_controller_floor_after_peak``) as pure Python; the engine-level behaviour, with a
resume, is in test_engine_distributed.py."""

from __future__ import annotations

from hdet_hf.controller import ControllerState
from hdet_hf.peak_floor import PeakFloor
from hdet_hf.registry import HyperparameterRegistry


def test_the_floor_is_the_factor_at_the_first_armed_converge_that_sees_the_schedule_decay():
    floor = PeakFloor()
    for value, scale in [(1e-4, 1.0), (5e-4, 0.7), (1e-3, 0.5), (1e-3, 0.45)]:  # warm-up, then a plateau
        floor.observe(value, {"lr": scale})
        assert floor.floor("lr") is None
    floor.observe(1e-3 * (1 - 1e-9), {"lr": 0.44})  # float noise on a plateau is not a decay
    assert floor.floor("lr") is None
    floor.observe(9.5e-4, {"lr": 0.42}, armed=False)  # decaying, but the early phase is not over
    assert floor.floor("lr") is None
    floor.observe(9e-4, {"lr": 0.4})
    floor.observe(5e-4, {"lr": 2.0})  # fixed once: later factors do not move it
    assert floor.floor("lr") == 0.4 and floor.floor("lr_embeddings") is None
    restored = PeakFloor()
    restored.load_state_dict(floor.state_dict())
    assert (restored.peak, restored.floors) == (1e-3, {"lr": 0.4})
    fresh = PeakFloor()
    fresh.load_state_dict({})  # a checkpoint from before the option
    assert (fresh.peak, fresh.floors) == (None, {})


def test_clamping_raises_a_factor_below_the_floor_and_drops_its_downward_velocity():
    registry = HyperparameterRegistry(2, 0, 0.5, True, 1, 100)
    registry.controllers["lr"] = ControllerState(scale=0.3, velocity=-0.2)
    registry.clamp_controller("lr", 0.5)
    assert (registry.controllers["lr"].scale, registry.controllers["lr"].velocity) == (0.5, 0.0)
    registry.controllers["lr"] = ControllerState(scale=0.8, velocity=-0.1)  # above it: untouched
    registry.clamp_controller("lr", 0.5)
    assert (registry.controllers["lr"].scale, registry.controllers["lr"].velocity) == (0.8, -0.1)
