"""Live tweaking (issue 25, item 4): Auto Re-simulate and the worker pre-started by the panel, in real bpy.

Timers never run headless, so the tests call the live module's step with the clock they want, as Blender's timer
would call it with the real one.
"""

import time

import numpy as np
import pytest

from tests.test_addon_scene import draw
from tests.test_addon_simulate import END, START

pytestmark = pytest.mark.bpy


@pytest.fixture
def cube(import_mesh):
    import bpy

    obj = import_mesh("cube_subdiv")
    bpy.context.scene.frame_start, bpy.context.scene.frame_end = START, END
    return obj


def run_until_idle(live, context, now: float, limit: float = 120.0) -> None:
    deadline = time.monotonic() + limit
    while live.LIVE.step(context, now) is not None:
        assert time.monotonic() < deadline, "the re-simulation did not end"
        time.sleep(0.02)


def test_a_burst_of_changes_replaces_the_keys_once_with_the_last_settings(addon, cube, monkeypatch):
    import bpy

    live, context = addon.live, bpy.context
    settings = cube.neurok
    settings.auto_resimulate = True
    settings.stiffness = 2e5
    assert not live.LIVE.due  # nothing to re-simulate before the first Simulate
    assert bpy.ops.neurok.simulate() == {"FINISHED"}
    writes = []
    write = addon.shape_keys.write_animation
    monkeypatch.setattr(addon.shape_keys, "write_animation", lambda *a: writes.append(a[0].name) or write(*a))

    start = time.monotonic()
    for stiffness in (3e5, 4e5, 5e5):  # a slider drag: several changes in a row
        settings.stiffness = stiffness
    assert list(live.LIVE.due) == [cube.name]
    assert bpy.app.timers.is_registered(live._tick)  # what drives step in the UI
    assert live.LIVE.step(context, start) is not None and live.LIVE.run is None  # still within the debounce
    live.LIVE.step(context, start + 1.0)
    first = live.LIVE.run
    assert first is not None and first.object_name == cube.name
    settings.material = "jelly"  # changed again while it runs: that run is cancelled, a new one is due
    assert live.LIVE.run is None and list(live.LIVE.due) == [cube.name]
    live.LIVE.step(context, start + 2.0)
    assert live.LIVE.run is not None and live.LIVE.run is not first
    run_until_idle(live, context, start + 3.0)
    assert writes == [cube.name]
    assert context.window_manager.neurok_job.live_message == f"re-simulated {cube.name}"

    # The keys are those of a fresh simulation with the final settings (jelly), not of any earlier ones.
    keys, _ = addon.shape_keys.read_positions(cube)
    expected = addon.operators.SimulationRun(context, cube)
    np.testing.assert_allclose(keys, expected.space.to_local(expected.wait()), atol=1e-5)

    settings.auto_resimulate = False
    settings.density = 500.0
    assert not live.LIVE.due


def test_the_panel_starts_the_worker_so_the_first_simulate_finds_the_model_loaded(addon, cube):
    import bpy

    for prestarted in (False, True):
        addon.client.shutdown()
        if prestarted:
            draw("NEUROK_PT_main")
            assert addon.client._client.alive  # drawing started it, without blocking on the model
        run = addon.operators.SimulationRun(bpy.context, cube)
        run.wait()
        assert run.job.warm is prestarted


def test_a_new_job_supersedes_the_one_in_flight(addon):
    """The worker's answers are read by one job at a time: submitting cancels the job in flight, whose poll then
    says so at once instead of waiting for answers nobody will read; the new job gets its result."""
    import sys

    worker = addon.client.get_client(sys.executable, 300.0)
    vertices = np.array([[0, 0, 0], [0.1, 0, 0], [0, 0.1, 0], [0, 0, 0.1]], np.float32)
    faces = np.array([[0, 2, 1], [0, 1, 3], [0, 3, 2], [1, 2, 3]], np.int32)
    pins = np.zeros(0, np.int32)
    first = worker.submit(vertices, faces, pins, {"frames": 40})
    second = worker.submit(vertices, faces, pins, {"frames": 2})
    with pytest.raises(addon.client.WorkerCancelled, match="a newer one replaced it"):
        worker.poll(first)
    assert worker.wait(second).shape == (3, 4, 3)


def test_scene_changes_schedule_a_re_simulation_and_frame_changes_do_not(addon, cube):
    """Gravity, fps, a still Wind field's strength are what the simulation reads from the scene: changing one
    schedules the watched object (Blender's depsgraph handler notices); playing frames does not."""
    import bpy

    live, scene = addon.live, bpy.context.scene
    bpy.ops.object.effector_add(type="WIND", location=(2.0, 0.0, 0.0))
    field = bpy.context.active_object
    bpy.context.view_layer.objects.active = cube
    cube.neurok.auto_resimulate = True
    assert bpy.ops.neurok.simulate() == {"FINISHED"}
    bpy.context.view_layer.update()
    for change in (lambda: setattr(scene, "gravity", (0.0, 0.0, -5.0)), lambda: setattr(scene.render, "fps", 30),
                   lambda: setattr(field.field, "strength", 3.0)):
        live.LIVE.due.clear()
        for frame in (3, 5, 1):
            scene.frame_set(frame)
        assert not live.LIVE.due
        change()
        bpy.context.view_layer.update()
        assert list(live.LIVE.due) == [cube.name]
    live.LIVE.stop()
