"""Simulate, Clear and Bake in real bpy through the real worker and the shipped model.

Convention under test: the range start..end gets one NeuROK key per frame, the rest frame included
(frames + 1 keys for ``frames = end - start`` simulated steps), so every frame shows exactly one key at 1.0.
"""

import numpy as np
import pytest

pytestmark = pytest.mark.bpy

START, END = 1, 9  # 8 simulated frames: 9 keys


def evaluated_world(obj) -> np.ndarray:
    import bpy

    obj_eval = obj.evaluated_get(bpy.context.evaluated_depsgraph_get())
    mesh = obj_eval.to_mesh()
    co = np.empty(len(mesh.vertices) * 3, np.float32)
    mesh.vertices.foreach_get("co", co)
    obj_eval.to_mesh_clear()
    m = np.array(obj.matrix_world)
    return co.reshape(-1, 3) @ m[:3, :3].T + m[:3, 3]


def neurok_values(obj) -> dict[str, float]:
    return {kb.name: kb.value for kb in obj.data.shape_keys.key_blocks if kb.name.startswith("NeuROK_")}


def rest_coordinates(obj) -> np.ndarray:
    co = np.empty(len(obj.data.vertices) * 3, np.float32)
    obj.data.vertices.foreach_get("co", co)
    return co.reshape(-1, 3)


@pytest.fixture
def cloth(import_mesh):
    """The sample cloth, moved and turned so that object and world space differ, pinned along its +Y edge."""
    import bpy

    obj = import_mesh("cloth_grid")
    obj.location, obj.rotation_euler, obj.scale = (0.3, -0.2, 0.5), (0.0, 0.0, 0.7), (1.5, 1.5, 1.5)
    group = obj.vertex_groups.new(name="pins")
    group.add([v.index for v in obj.data.vertices if v.co.y > 0.49], 1.0, "REPLACE")
    obj.neurok.pin_group, obj.neurok.material = "pins", "cloth"
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = START, END
    bpy.context.view_layer.update()
    return obj


@pytest.fixture
def cube(import_mesh):
    import bpy

    obj = import_mesh("cube_subdiv")
    bpy.context.scene.frame_start, bpy.context.scene.frame_end = START, END
    return obj


def simulate_through_run(addon, obj) -> np.ndarray:
    """What the operator does, step by step, keeping the runtime's own positions for comparison."""
    import bpy

    run = addon.operators.SimulationRun(bpy.context, obj)
    positions = run.wait()
    run.finish(positions)
    return positions


def test_pinned_cloth_keys_frames_and_positions(addon, cloth):
    import bpy

    positions = simulate_through_run(addon, cloth)
    frames = END - START
    assert positions.shape == (frames + 1, len(cloth.data.vertices), 3)
    names = [kb.name for kb in addon.shape_keys.neurok_key_blocks(cloth)]
    assert names == [f"NeuROK_{f:04d}" for f in range(START, END + 1)]
    pinned = [v.index for v in cloth.data.vertices if v.co.y > 0.49]
    rest = evaluated_world(cloth)
    scene = bpy.context.scene
    for f in range(START - 2, END + 3):
        scene.frame_set(f)
        values = neurok_values(cloth)
        active = [name for name, value in values.items() if value == 1.0]
        expected_frame = min(max(f, START), END)
        assert active == [f"NeuROK_{expected_frame:04d}"], (f, values)
        assert sum(values.values()) == 1.0
        world = evaluated_world(cloth)
        np.testing.assert_allclose(world, positions[expected_frame - START], atol=2e-5)
        np.testing.assert_allclose(world[pinned], rest[pinned], atol=2e-5)


def test_closed_mesh_through_the_operator(cube):
    import bpy

    before = rest_coordinates(cube)
    assert bpy.ops.neurok.simulate() == {"FINISHED"}
    assert len(neurok_values(cube)) == END - START + 1
    scene = bpy.context.scene
    scene.frame_set(START)
    np.testing.assert_allclose(evaluated_world(cube), before, atol=1e-6)  # frame 0 is the rest shape
    scene.frame_set(END)
    assert np.isfinite(evaluated_world(cube)).all()
    np.testing.assert_array_equal(rest_coordinates(cube), before)  # the mesh itself is never edited
    # Re-simulating on a deformed frame starts again from the rest shape, not from the old motion.
    assert bpy.ops.neurok.simulate() == {"FINISHED"}
    scene.frame_set(START)
    np.testing.assert_allclose(evaluated_world(cube), before, atol=1e-6)


def test_active_user_shape_keys_are_not_counted_twice(addon, cube):
    import bpy

    cube.shape_key_add(name="Basis")
    bulge = cube.shape_key_add(name="Bulge")
    bulge.data[0].co.z += 0.1
    bulge.value = 1.0  # part of the shape the artist sees, so part of the simulated rest shape
    positions = simulate_through_run(addon, cube)
    for f in (START, END):
        bpy.context.scene.frame_set(f)
        np.testing.assert_allclose(evaluated_world(cube), positions[f - START], atol=2e-5)


def test_resimulate_replaces_keys_and_keeps_the_users_own(cube):
    import bpy

    cube.shape_key_add(name="Basis")
    smile = cube.shape_key_add(name="Smile")
    smile.data[0].co.z += 0.1
    smile.value = 0.0
    smile.keyframe_insert("value", frame=1)
    smile.value = 1.0
    smile.keyframe_insert("value", frame=20)
    assert bpy.ops.neurok.simulate() == {"FINISHED"}
    scene = bpy.context.scene
    scene.frame_end = END + 3
    assert bpy.ops.neurok.simulate() == {"FINISHED"}
    names = [kb.name for kb in cube.data.shape_keys.key_blocks]
    assert names[:2] == ["Basis", "Smile"]
    assert names[2:] == [f"NeuROK_{f:04d}" for f in range(START, END + 4)]
    paths = [fc.data_path for fc in _fcurves(cube)]
    assert paths.count('key_blocks["Smile"].value') == 1
    assert len(paths) == 1 + END + 4 - START  # no curves left over from the first run
    scene.frame_set(20)
    assert cube.data.shape_keys.key_blocks["Smile"].value == pytest.approx(1.0)
    assert bpy.ops.neurok.clear() == {"FINISHED"}
    assert [kb.name for kb in cube.data.shape_keys.key_blocks] == ["Basis", "Smile"]
    assert [fc.data_path for fc in _fcurves(cube)] == ['key_blocks["Smile"].value']


def _fcurves(obj):
    from bpy_extras.anim_utils import action_get_channelbag_for_slot

    anim = obj.data.shape_keys.animation_data
    return action_get_channelbag_for_slot(anim.action, anim.action_slot).fcurves


def test_clear_restores_the_original_mesh(cube):
    import bpy

    before = rest_coordinates(cube)
    assert bpy.ops.neurok.simulate() == {"FINISHED"}
    bpy.context.scene.frame_set(END)
    assert bpy.ops.neurok.clear() == {"FINISHED"}
    assert cube.data.shape_keys is None  # the Basis NeuROK added is gone too
    assert not [a for a in bpy.data.actions if a.users]
    np.testing.assert_array_equal(evaluated_world(cube), before)


def simulate_and_capture(obj, frames) -> dict:
    """Simulate the active object and record its evaluated world-space vertices at the given frames."""
    import bpy

    assert bpy.ops.neurok.simulate() == {"FINISHED"}
    captured = {}
    for f in frames:
        bpy.context.scene.frame_set(f)
        captured[f] = evaluated_world(obj)
    return captured


def test_save_and_reload_keeps_the_animation(cube, tmp_path):
    import bpy

    expected = simulate_and_capture(cube, (START, START + 3, END))
    path = str(tmp_path / "sim.blend")
    bpy.ops.wm.save_as_mainfile(filepath=path)
    bpy.ops.wm.read_factory_settings(use_empty=True)
    bpy.ops.wm.open_mainfile(filepath=path)
    obj = bpy.data.objects["cube_subdiv"]
    for f, world in expected.items():
        bpy.context.scene.frame_set(f)
        np.testing.assert_allclose(evaluated_world(obj), world, atol=1e-6)


def test_cancel_leaves_the_scene_unchanged(addon, cube):
    import bpy

    assert bpy.ops.neurok.simulate() == {"FINISHED"}
    keys_before = [kb.name for kb in cube.data.shape_keys.key_blocks]
    bpy.context.scene.frame_end = END + 20
    run = addon.operators.SimulationRun(bpy.context, cube)
    run.cancel()  # what Esc does in the modal operator
    with pytest.raises(addon.client.WorkerCancelled):
        run.wait()
    assert [kb.name for kb in cube.data.shape_keys.key_blocks] == keys_before
    assert bpy.ops.neurok.simulate() == {"FINISHED"}  # the worker is still usable
    assert len(neurok_values(cube)) == END + 20 - START + 1


def test_errors_reach_the_user_and_write_nothing(cube, import_mesh):
    import bpy

    cube.neurok.pin_group = "missing"
    with pytest.raises(RuntimeError, match="pin group 'missing' does not exist"):
        bpy.ops.neurok.simulate()
    cube.neurok.pin_group = ""
    group = cube.vertex_groups.new(name="all")
    group.add(range(len(cube.data.vertices)), 1.0, "REPLACE")
    cube.neurok.pin_group = "all"
    with pytest.raises(RuntimeError, match="every vertex is pinned"):  # the runtime's own validation
        bpy.ops.neurok.simulate()
    assert cube.data.shape_keys is None
    mesh = bpy.data.meshes.new("points")
    mesh.from_pydata([(0, 0, 0), (1, 0, 0), (0, 1, 0)], [], [])
    points = bpy.data.objects.new("points", mesh)
    bpy.context.scene.collection.objects.link(points)
    bpy.context.view_layer.objects.active = points
    with pytest.raises(RuntimeError, match="no faces"):
        bpy.ops.neurok.simulate()
    assert points.data.shape_keys is None


def test_bake_writes_a_point_cache_that_plays_back(cube, tmp_path):
    import bpy

    expected = simulate_and_capture(cube, (START, START + 4, END))
    scene = bpy.context.scene
    path = tmp_path / "cube.pc2"
    assert bpy.ops.neurok.bake(filepath=str(path), remove_shape_keys=True) == {"FINISHED"}
    assert cube.data.shape_keys is None and cube.modifiers[-1].type == "MESH_CACHE"
    header = path.read_bytes()[:32]
    assert header[:12] == b"POINTCACHE2\0"
    assert path.stat().st_size == 32 + (END - START + 1) * len(cube.data.vertices) * 12
    for f, world in expected.items():
        scene.frame_set(f)
        np.testing.assert_allclose(evaluated_world(cube), world, atol=1e-5)

