"""The installed extension registers and unregisters cleanly, and its settings behave (no model needed)."""

import pytest

pytestmark = pytest.mark.bpy

ADDON_MODULE = "bl_ext.user_default.neurok"
OPERATORS = ("simulate", "clear", "bake", "earth_gravity", "scale_stiffness", "setup_runtime")
PANELS = ("NEUROK_PT_main", "NEUROK_PT_forces", "NEUROK_PT_constraints", "NEUROK_PT_frames")


def registered() -> dict[str, bool]:
    import bpy

    state = {f"op {name}": hasattr(bpy.types, f"NEUROK_OT_{name}") for name in OPERATORS}
    state.update({f"panel {name}": hasattr(bpy.types, name) for name in PANELS})
    state["Object.neurok"] = hasattr(bpy.types.Object, "neurok")
    state["Scene.neurok"] = hasattr(bpy.types.Scene, "neurok")
    state["WindowManager.neurok_job"] = hasattr(bpy.types.WindowManager, "neurok_job")
    return state


def test_register_unregister_cleanly(scene):
    import addon_utils

    assert all(registered().values()), registered()
    addon_utils.disable(ADDON_MODULE, default_set=True)
    assert not any(registered().values()), registered()
    addon_utils.enable(ADDON_MODULE, default_set=True)
    assert all(registered().values()), registered()


def test_operators_are_undoable_and_panels_in_the_sidebar(scene):
    import bpy

    for name in ("simulate", "clear", "bake", "earth_gravity", "scale_stiffness"):
        assert {"REGISTER", "UNDO"} <= getattr(bpy.types, f"NEUROK_OT_{name}").bl_options
    main = bpy.types.NEUROK_PT_main
    assert (main.bl_space_type, main.bl_region_type, main.bl_category) == ("VIEW_3D", "UI", "NeuROK")


def test_material_preset_fills_editable_values(import_mesh):
    from model_runtime.materials import MATERIALS

    settings = import_mesh("cube_subdiv").neurok
    settings.material = "jelly"
    jelly = MATERIALS["jelly"]
    assert (settings.stiffness, settings.density, settings.damping) == pytest.approx(
        (jelly.stiffness, jelly.density, jelly.damping))
    settings.stiffness = 1234.0
    assert settings.stiffness == pytest.approx(1234.0) and settings.material == "jelly"


def test_limits_reject_nonsense(import_mesh):
    settings = import_mesh("cube_subdiv").neurok
    settings.stiffness, settings.density, settings.damping, settings.drag = -5.0, 0.0, -1.0, -3.0
    assert (settings.stiffness, settings.density, settings.damping, settings.drag) == (1.0, 1.0, 0.0, 0.0)
    settings.density = 1e9
    assert settings.density == 25_000.0


def test_poll_needs_an_editable_mesh(import_mesh):
    import bpy

    assert not bpy.ops.neurok.simulate.poll()  # empty scene: nothing active
    obj = import_mesh("cube_subdiv")
    assert bpy.ops.neurok.simulate.poll() and bpy.ops.neurok.clear.poll()
    assert not bpy.ops.neurok.bake.poll()  # nothing simulated yet
    bpy.ops.object.mode_set(mode="EDIT")
    assert not bpy.ops.neurok.simulate.poll()
    bpy.ops.object.mode_set(mode="OBJECT")
    camera = bpy.data.objects.new("camera", bpy.data.cameras.new("camera"))
    scene = bpy.context.scene
    scene.collection.objects.link(camera)
    bpy.context.view_layer.objects.active = camera
    assert not bpy.ops.neurok.simulate.poll()
    bpy.context.view_layer.objects.active = obj


def test_worker_python_comes_from_preferences_then_environment(scene, addon, monkeypatch):
    import bpy

    prefs = bpy.context.preferences.addons[ADDON_MODULE].preferences
    assert addon.preferences.worker_python(bpy.context) == prefs.python_path
    prefs.python_path = ""
    monkeypatch.setenv("NEUROK_PYTHON", "/opt/python-with-torch/bin/python")
    assert addon.preferences.worker_python(bpy.context) == "/opt/python-with-torch/bin/python"
    monkeypatch.delenv("NEUROK_PYTHON")
    default = addon.preferences.worker_python(bpy.context)
    assert default.startswith(bpy.utils.extension_path_user(ADDON_MODULE)) and "runtime" in default
