"""An animated object carries its simulation along: the frame's acceleration acts as an inertial force."""

import numpy as np
import pytest

from model_runtime.errors import ParameterError
from model_runtime.lab.data.shapes import grid_sheet
from model_runtime.params import make_params
from model_runtime.simulator import Simulator

FPS, FRAMES = 24.0, 24


@pytest.fixture(scope="module")
def sim():
    return Simulator()


@pytest.fixture(scope="module")
def sheet():
    v, f = grid_sheet(11, 11, 0.8, 0.8)
    return v, f, np.nonzero(v[:, 1] == v[:, 1].min())[0], np.nonzero(v[:, 1] == v[:, 1].max())[0]


def moving(offset) -> np.ndarray:
    """Translations by offset(t) (m, along z) at each frame time, as 4x4 transforms."""
    m = np.repeat(np.eye(4)[None], FRAMES + 1, axis=0)
    m[:, 2, 3] = [offset(i / FPS) for i in range(FRAMES + 1)]
    return m


def run(sim, sheet, frame_motion):
    v, f, pins, _ = sheet
    p = make_params(frames=FRAMES, fps=FPS, gravity=(0, 0, 0), material="cloth", drag=1.0, pins=pins,
                    frame_motion=frame_motion, num_vertices=len(v))
    return sim.simulate(v, f, p)


def test_a_sheet_on_an_object_moved_1m_in_half_a_second_lags_then_swings_past(sim, sheet):
    v, _, pins, far = sheet

    def smoothstep(t):
        u = min(t / 0.5, 1.0)
        return 3 * u * u - 2 * u**3

    out = run(sim, sheet, moving(smoothstep))
    lag = out[:, far, 2].mean(1) - v[far, 2].mean()  # object space: the free edge relative to the pins
    speeding_up, afterwards = lag[1:7], lag[7:]  # the object accelerates over frames 0-6, brakes over 6-12
    assert lag[0] == 0 and speeding_up.max() < 0 and speeding_up.min() < -0.01, lag.round(3)
    # braking turns the lag around, and the floppy sheet carries on past its pins once the object has stopped
    assert np.argmin(lag) < 12 and afterwards.max() > 0.01, lag.round(3)
    diagonal = np.linalg.norm(np.ptp(v, axis=0))
    assert np.abs(out[:, pins] - v[pins]).max() < 1e-3 * diagonal


def test_a_steadily_moving_object_moves_nothing_in_its_own_space(sim, sheet):
    v = sheet[0]
    still = run(sim, sheet, None)
    steady = run(sim, sheet, moving(lambda t: 2.0 * t))  # 2 m/s, no acceleration
    assert np.abs(steady - still).max() < 1e-4 * np.linalg.norm(np.ptp(v, axis=0))


@pytest.mark.parametrize("bad, match", [
    (np.eye(4)[None].repeat(3, 0), "one 4x4 transform per frame"),
    (np.diag([2.0, 1, 1, 1])[None].repeat(FRAMES + 1, 0), "rotations and translations only"),
    (np.full((FRAMES + 1, 4, 4), np.nan), "finite"),
])
def test_bad_frame_motion_is_refused_with_the_reason(bad, match):
    with pytest.raises(ParameterError, match=match):
        make_params(frames=FRAMES, frame_motion=bad)


def test_wind_on_a_turning_object_keeps_its_world_direction(sim, sheet):
    """Half a turn about the pinned edge's normal over the run: a world-fixed wind ends up pushing the other way in
    object space, where wind fixed to the object would keep pushing the same way."""
    v, f, pins, far = sheet
    turn = np.repeat(np.eye(4)[None], FRAMES + 1, axis=0)
    for i in range(FRAMES + 1):
        a = np.pi * min(i / 12, 1.0)  # half a turn about x over half a second, then held
        turn[i, 1:3, 1:3] = [[np.cos(a), -np.sin(a)], [np.sin(a), np.cos(a)]]
    p = make_params(frames=FRAMES, fps=FPS, gravity=(0, 0, 0), material="cloth", drag=2.0, pins=pins,
                    frame_motion=turn, wind=[{"acceleration": [0, 0, 4.0]}], num_vertices=len(v))
    still = make_params(frames=FRAMES, fps=FPS, gravity=(0, 0, 0), material="cloth", drag=2.0, pins=pins,
                        frame_motion=turn, num_vertices=len(v))
    pushed = sim.simulate(v, f, p)[-1, far, 2].mean() - sim.simulate(v, f, still)[-1, far, 2].mean()
    assert pushed < -0.01  # world +z is object -z after half a turn
