"""Scene integration without silent surprises (issue 26, defects 4-8), in real bpy through the real worker.

Blender's own Cloth, measured headless in bpy 5.0.1: a 2-unit plane with default Cloth settings drops the same
2.21 scene units in 1 s at unit scale 1 and at 0.01, so Cloth reads the scene's gravity in scene units per s^2.
NeuROK does the same (-9.81 at unit scale 0.01 is 0.0981 m/s^2), and says so and offers the fix.
"""

import ctypes
import os
import sys
from types import SimpleNamespace

import numpy as np
import pytest

from tests.test_addon_simulate import END, START, evaluated_world, rest_coordinates

pytestmark = pytest.mark.bpy

ADDON_MODULE = "bl_ext.user_default.neurok"


def reports(capfd) -> str:
    """What the operators reported: background Blender prints reports ("Warning: ...") with C stdio."""
    ctypes.CDLL(None).fflush(None)  # C's stdout is block-buffered when it is not a terminal
    return capfd.readouterr().out


class Layout:
    """Stands in for a panel's UILayout (none exists headless): records texts and operators drawn, accepts the rest."""

    def __init__(self, texts: list):
        self.texts = texts

    def __getattr__(self, name):
        def call(*args, **kwargs):
            if kwargs.get("text"):
                self.texts.append(kwargs["text"])
            if name == "operator":
                self.texts.append(args[0])
            return Layout(self.texts)

        return call


def draw(panel: str) -> list[str]:
    import bpy

    texts = []
    getattr(bpy.types, panel).draw(SimpleNamespace(layout=Layout(texts)), bpy.context)
    return texts


@pytest.fixture
def cube(import_mesh):
    import bpy

    obj = import_mesh("cube_subdiv")
    bpy.context.scene.frame_start, bpy.context.scene.frame_end = START, END
    return obj


@pytest.mark.parametrize("unit", [0.01, 1.0])
def test_effective_gravity_follows_the_unit_scale_warns_and_is_fixed_in_one_click(cube, capfd, unit):
    import bpy

    scene = bpy.context.scene
    scene.unit_settings.scale_length = unit
    settings = cube.neurok
    assert settings.effective_gravity(scene) == pytest.approx((0.0, 0.0, -9.81 * unit))
    assert bpy.ops.neurok.simulate() == {"FINISHED"}
    out = reports(capfd)
    assert f"gravity (0, 0, {-9.81 * unit:.3g}) m/s^2 from the scene" in out
    warned = "Warning: gravity is 0.0981 m/s^2, 0.01 of Earth's: Blender reads it in scene units per s^2" in out
    assert warned == (unit == 0.01)
    assert any("0.0981 m/s^2" in t for t in draw("NEUROK_PT_forces")) == (unit == 0.01)
    assert bpy.ops.neurok.earth_gravity() == {"FINISHED"}
    assert tuple(scene.gravity) == pytest.approx((0.0, 0.0, -9.81 / unit))
    assert settings.effective_gravity(scene) == pytest.approx((0.0, 0.0, -9.81), rel=1e-6)
    assert settings.gravity_problem(scene) == ""
    settings.use_scene_gravity, settings.gravity = False, (0.0, 0.0, -9.81)  # the custom vector is fixed the same way
    assert bool(settings.gravity_problem(scene)) == (unit == 0.01)
    assert bpy.ops.neurok.earth_gravity() == {"FINISHED"}
    assert tuple(settings.gravity) == pytest.approx((0.0, 0.0, -9.81 / unit))


def test_a_centimetre_scene_after_the_fix_moves_like_a_metre_scene(addon, cube):
    """The same 2 m cube: 2 units at unit scale 1, or 200 units at 0.01 with Set Earth Gravity."""
    import bpy

    scene = bpy.context.scene
    motion = {}
    for unit in (1.0, 0.01):
        scene.unit_settings.scale_length = unit
        cube.scale = (1.0 / unit,) * 3
        bpy.context.view_layer.update()
        assert bpy.ops.neurok.earth_gravity() == {"FINISHED"}
        assert bpy.ops.neurok.simulate() == {"FINISHED"}
        scene.frame_set(END)
        motion[unit] = evaluated_world(cube) * unit  # metres
    assert np.abs(motion[1.0] - rest_coordinates(cube)).max() > 0.01  # it did fall
    np.testing.assert_allclose(motion[0.01], motion[1.0], atol=1e-3)


def test_a_visible_subdivision_simulates_the_cage(addon, cube, capfd):
    import bpy

    subdivision = cube.modifiers.new("Subdivision", "SUBSURF")
    subdivision.levels = 1
    assert any("Simulates the cage" in t for t in draw("NEUROK_PT_main"))
    assert bpy.ops.neurok.simulate() == {"FINISHED"}
    assert f"simulated the cage of {cube.name} (its mesh before Subdivision" in reports(capfd)
    positions, first = addon.shape_keys.read_positions(cube)
    assert (first, len(positions)) == (START, END - START + 1)
    scene = bpy.context.scene
    scene.frame_set(END)
    assert len(evaluated_world(cube)) > len(cube.data.vertices)  # the result is subdivided on top
    subdivision.show_viewport = False
    cage = evaluated_world(cube)
    assert np.abs(cage - rest_coordinates(cube)).max() > 0.01
    m = np.array(cube.matrix_world)
    np.testing.assert_allclose(cage, positions[-1] @ m[:3, :3].T + m[:3, 3], atol=1e-5)


def test_surprises_are_reported(cube, import_mesh, capfd):
    import bpy

    other = import_mesh("cube_subdiv")
    group = cube.vertex_groups.new(name="pins")
    group.add([0, 1, 2], 0.4, "REPLACE")  # weights <= 0.5 pin nothing
    cube.neurok.pin_group = "pins"
    cube.neurok.use_scene_gravity, cube.neurok.gravity = False, (0.0, 0.0, -5.0)
    cube.select_set(True)
    other.select_set(True)
    bpy.context.view_layer.objects.active = cube
    assert "Simulates 2 selected meshes, one after another" in draw("NEUROK_PT_main")
    assert any("(0, 0, -5) m/s²" in t for t in draw("NEUROK_PT_forces"))
    assert bpy.ops.neurok.simulate() == {"FINISHED"}
    out = reports(capfd)
    assert f"Info: NeuROK: simulating 2 selected meshes one after another: {cube.name}, {other.name}" in out
    assert f"Warning: {cube.name}'s pin group 'pins' has no vertex with a weight above 0.5: nothing is pinned" in out
    assert (f"Warning: {cube.name} uses its custom gravity (0, 0, -5) m/s^2, not the scene's (0, 0, -9.81) m/s^2"
            in out)
    assert out.count("Info: NeuROK: simulated 8 frames of") == 2
    assert cube.data.shape_keys is not None and other.data.shape_keys is not None


def test_one_selected_mesh_failing_does_not_stop_the_others(cube, import_mesh):
    import bpy

    other = import_mesh("cube_subdiv")
    other.neurok.pin_group = "missing"
    cube.select_set(True)
    bpy.context.view_layer.objects.active = other
    with pytest.raises(RuntimeError, match=f"{other.name}: the pin group 'missing' does not exist"):
        bpy.ops.neurok.simulate()
    assert other.data.shape_keys is None and cube.data.shape_keys is not None


def test_a_missing_module_names_it_and_points_to_the_preferences(addon, cube, tmp_path):
    import bpy

    python = tmp_path / "python-without-site-packages"
    python.write_text(f'#!/bin/sh\nexec "{sys.executable}" -S "$@"\n')  # no numpy: the worker cannot even start
    os.chmod(python, 0o755)
    bpy.context.preferences.addons[ADDON_MODULE].preferences.python_path = str(python)
    try:
        with pytest.raises(RuntimeError, match=r"lacks the module 'numpy': press Set up Runtime.*Add-ons > NeuROK"):
            bpy.ops.neurok.simulate()
    finally:
        addon.client.shutdown()
    assert cube.data.shape_keys is None


def test_stiffness_steps_and_edited_presets(addon, cube):
    import bpy

    settings = cube.neurok
    settings.material = "jelly"
    assert not settings.preset_edited()
    jelly = settings.stiffness
    assert bpy.ops.neurok.scale_stiffness(factor=2.0) == {"FINISHED"}
    assert settings.stiffness == pytest.approx(2 * jelly) and settings.preset_edited()
    assert "Custom values (pick a preset to reset them)" in draw("NEUROK_PT_main")
    settings.material = "jelly"  # picking the preset again resets its values
    assert settings.stiffness == pytest.approx(jelly) and not settings.preset_edited()
    assert [addon.panels.pressure_text(p) for p in (500.0, 2.5e5, 1e6, 1.1e10)] == [
        "500 Pa", "250 kPa", "1 MPa", "11 GPa"]


def test_the_tab_stays_for_non_mesh_objects_and_says_why(scene):
    import bpy

    camera = bpy.data.objects.new("Camera", bpy.data.cameras.new("Camera"))
    scene.collection.objects.link(camera)
    bpy.context.view_layer.objects.active = camera
    assert bpy.types.NEUROK_PT_main.poll(bpy.context) and not bpy.types.NEUROK_PT_forces.poll(bpy.context)
    assert draw("NEUROK_PT_main") == ["Camera is a camera: NeuROK simulates mesh objects"]
    assert not bpy.ops.neurok.simulate.poll()


def test_simulate_and_clear_keep_the_active_shape_key(addon, cube):
    import bpy

    cube.shape_key_add(name="Basis")
    cube.shape_key_add(name="Smile")
    cube.active_shape_key_index = 1
    rest = rest_coordinates(cube).astype(np.float64)
    addon.shape_keys.write_animation(cube, np.stack([rest] * 3), rest, START)
    assert cube.active_shape_key.name == "Smile"
    assert bpy.ops.neurok.clear() == {"FINISHED"}
    assert cube.active_shape_key.name == "Smile"


def test_long_keyed_ranges_say_what_playback_costs(addon, cube):
    import bpy

    rest = rest_coordinates(cube).astype(np.float64)
    long = addon.panels.LONG_RANGE + 1
    addon.shape_keys.write_animation(cube, np.stack([rest] * long), rest, START)
    texts = draw("NEUROK_PT_main")
    assert f"Playback: ~{addon.panels.keyed_playback_ms(long):.0f} ms per frame change (under 1 ms baked)" in texts
    assert texts.count("neurok.bake") == 2  # offered next to the cost, besides the usual button
    bpy.context.scene.frame_end = START + long
    assert any("keyed frames play slowly" in t for t in draw("NEUROK_PT_frames"))


class ModalDriver:
    """Runs the Simulate operator's modal code (the UI path) headless, where Blender never calls modal() itself:
    the operator's own functions on a stand-in instance, fed TIMER and ESC events by hand."""

    def __init__(self, context):
        import bpy

        cls = bpy.types.NEUROK_OT_simulate
        for name in ("_queue", "_start_next", "_fraction", "_finish", "_result", "_show", "modal", "_end"):
            setattr(self, name, getattr(cls, name).__get__(self))
        self.reports: list[tuple[str, str]] = []
        self._queue(context)
        self._run = self._start_next(context)
        self._timer = context.window_manager.event_timer_add(0.1, window=context.window)

    def report(self, kind, text):
        self.reports.append((next(iter(kind)), text))

    def event(self, context, kind: str) -> set[str]:
        return self.modal(context, SimpleNamespace(type=kind, value="PRESS"))


def test_the_modal_path_runs_every_selected_mesh_under_one_progress(cube, import_mesh):
    import time

    import bpy

    other = import_mesh("cube_subdiv")
    cube.select_set(True)
    context = bpy.context
    driver = ModalDriver(context)
    progress = []
    while (result := driver.event(context, "TIMER")) == {"PASS_THROUGH"}:
        progress.append(context.window_manager.neurok_job.progress)
        time.sleep(0.02)
    assert result == {"FINISHED"}
    assert progress == sorted(progress) and progress[-1] > 0.5  # one bar over both, never going back
    assert [text for kind, text in driver.reports if text.startswith("NeuROK: simulated")] == [
        f"NeuROK: simulated {END - START} frames of {other.name}; gravity (0, 0, -9.81) m/s^2 from the scene",
        f"NeuROK: simulated {END - START} frames of {cube.name}; gravity (0, 0, -9.81) m/s^2 from the scene"]
    assert not context.window_manager.neurok_job.running


def test_esc_in_the_modal_path_leaves_every_object_unchanged(cube, import_mesh):
    import bpy

    other = import_mesh("cube_subdiv")
    cube.select_set(True)
    driver = ModalDriver(bpy.context)
    assert driver.event(bpy.context, "ESC") == {"CANCELLED"}
    assert cube.data.shape_keys is None and other.data.shape_keys is None
    assert ("INFO", f"NeuROK simulation cancelled; {other.name} and the rest unchanged") in driver.reports
