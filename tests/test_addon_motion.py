"""Objects that move and simulations that start anywhere (issue 25, items 1 and 2), in real bpy through the real
worker and the shipped model."""

import math

import numpy as np
import pytest

from tests.test_addon_scene import reports
from tests.test_addon_simulate import evaluated_world

pytestmark = pytest.mark.bpy


def sheet(name: str, size: float, n: int):
    """An n x n grid of size x size in its object's XY plane, the active and only selected object."""
    import bpy

    xs = np.linspace(-size / 2, size / 2, n)
    verts = [(x, y, 0.0) for y in xs for x in xs]
    faces = [(j * n + i, j * n + i + 1, (j + 1) * n + i + 1, (j + 1) * n + i) for j in range(n - 1)
             for i in range(n - 1)]
    mesh = bpy.data.meshes.new(name)
    mesh.from_pydata(verts, [], faces)
    obj = bpy.data.objects.new(name, mesh)
    bpy.context.scene.collection.objects.link(obj)
    for other in bpy.context.selected_objects:
        other.select_set(False)
    obj.select_set(True)
    bpy.context.view_layer.objects.active = obj
    return obj


def local_keys(addon, obj) -> np.ndarray:
    positions, _ = addon.shape_keys.read_positions(obj)
    return positions.astype(np.float64)


@pytest.mark.parametrize("moved_by", ["keys", "parent"])
def test_an_object_moved_1m_sideways_in_half_a_second_drags_its_free_part_along(addon, scene, capfd, moved_by):
    """A sheet hanging from its top edge (gravity off), turned and scaled so object and world axes differ, moved
    1 m along world Y between frames 1 and 13 at 24 fps (Bezier keys: it speeds up, then slows down), by keys of
    its own or of the empty it is parented to."""
    import bpy

    scene.use_gravity = False
    scene.render.fps, scene.frame_start, scene.frame_end = 24, 1, 25
    obj = sheet("flag", 0.4, 9)
    obj.rotation_euler, obj.scale = (math.pi / 2, 0.0, 0.3), (2.0, 2.0, 2.0)
    group = obj.vertex_groups.new(name="pins")
    pinned = [v.index for v in obj.data.vertices if v.co.y > 0.19]
    group.add(pinned, 1.0, "REPLACE")
    obj.neurok.pin_group, obj.neurok.material, obj.neurok.drag = "pins", "cloth", 1.0
    mover = obj
    if moved_by == "parent":
        mover = bpy.data.objects.new("arm", None)
        scene.collection.objects.link(mover)
        obj.parent = mover
    for frame, y in ((1, 0.0), (13, 1.0)):
        mover.location = (0.0, y, 0.0)
        mover.keyframe_insert("location", frame=frame)
    scene.frame_set(7)  # simulating from elsewhere must not matter
    assert bpy.ops.neurok.simulate() == {"FINISHED"}
    assert "flag moves: simulated in its animated frame" in reports(capfd)
    assert scene.frame_current == 7
    rest = np.array([v.co for v in obj.data.vertices])
    local = local_keys(addon, obj)
    direction = np.linalg.inv(np.array(obj.matrix_world)[:3, :3]) @ [0.0, 1.0, 0.0]
    far = [v.index for v in obj.data.vertices if v.co.y < -0.19]
    lead = (local[:, far] - rest[far]).mean(1) @ (direction / np.linalg.norm(direction))
    diagonal = np.linalg.norm(np.ptp(rest, axis=0))
    assert abs(lead[0]) < 1e-6 and lead[1:7].max() < 0 and lead[1:7].min() < -0.02 * diagonal, lead.round(4)  # lags
    # braking: the free part keeps going and catches up on its stopped pins (a cloth, weightless, has only its
    # weak bending to turn it, so it does not spring back)
    assert lead[-1] - lead.min() > 0.2 * diagonal and np.all(np.diff(lead[16:]) > 0), lead.round(4)
    assert np.abs(local[:, pinned] - rest[pinned]).max() < 1e-3 * diagonal
    for frame in (1, 7, 13, 20):  # in the world, the pinned edge rides exactly along with the animation
        scene.frame_set(frame)
        m = np.array(obj.matrix_world)
        np.testing.assert_allclose(evaluated_world(obj)[pinned], rest[pinned] @ m[:3, :3].T + m[:3, 3], atol=1e-4)


def test_a_moving_object_with_the_ground_is_refused_and_nothing_is_written(scene):
    import bpy

    scene.frame_start, scene.frame_end = 1, 5
    obj = sheet("plate", 0.4, 5)
    obj.keyframe_insert("location", frame=1)
    obj.location.x = 1.0
    obj.keyframe_insert("location", frame=5)
    obj.neurok.use_ground = True
    with pytest.raises(RuntimeError, match="cannot yet combine a moving object with the ground"):
        bpy.ops.neurok.simulate()
    assert obj.data.shape_keys is None
    obj.neurok.use_ground = False
    obj.keyframe_delete("location", frame=5)  # keys that do not move it: simulated in world space with the ground
    obj.neurok.use_ground = True
    assert bpy.ops.neurok.simulate() == {"FINISHED"}


def test_start_frame_101_at_30_fps_lands_keys_from_101_on_the_shape_at_101(addon, scene, capfd):
    """Free fall from frame 101 at 30 fps in a centimetre scene: keys on 101..109, the rest shape as evaluated at
    frame 101 (a shape key keyed to come in by then), the drop g t^2 / 2 with t in seconds of 30 fps."""
    import bpy

    scene.render.fps, scene.render.fps_base = 30, 1.0
    scene.frame_start, scene.frame_end = 101, 109
    scene.unit_settings.scale_length = 0.01
    scene.gravity = (0.0, 0.0, -981.0)  # Earth's, in scene units (cm) per s^2
    obj = sheet("card", 40.0, 5)  # 40 cm
    obj.neurok.material, obj.neurok.drag = "rubber", 0.0
    obj.shape_key_add(name="Basis")
    lift = obj.shape_key_add(name="Lift")
    lift.data[12].co.z += 5.0
    for frame, value in ((1, 0.0), (101, 1.0)):
        lift.value = value
        lift.keyframe_insert("value", frame=frame)
    scene.frame_set(1)
    expected_rest = evaluated_world(obj)
    expected_rest[12, 2] += 5.0
    assert bpy.ops.neurok.simulate() == {"FINISHED"}
    assert scene.frame_current == 1
    names = [kb.name for kb in addon.shape_keys.neurok_key_blocks(obj)]
    assert names == [f"NeuROK_{f:04d}" for f in range(101, 110)]
    scene.frame_set(101)
    np.testing.assert_allclose(evaluated_world(obj), expected_rest, atol=1e-3)
    scene.frame_set(109)
    drop = expected_rest[:, 2].mean() - evaluated_world(obj)[:, 2].mean()
    assert drop == pytest.approx(0.5 * 981.0 * (8 / 30) ** 2, rel=0.05)  # 34.9 cm
