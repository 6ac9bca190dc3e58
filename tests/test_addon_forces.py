"""Wind and colliders from the scene (issue 25, item 3): Blender's Wind force fields and Collision objects act on
the simulated body, in real bpy through the real worker and the shipped model."""

import math

import numpy as np
import pytest

from model_runtime.contact import make_colliders
from tests.test_addon_motion import sheet
from tests.test_addon_scene import reports
from tests.test_addon_simulate import evaluated_world

pytestmark = pytest.mark.bpy


def collision(obj):
    import bpy

    with bpy.context.temp_override(object=obj, active_object=obj):
        bpy.ops.object.modifier_add(type="COLLISION")
    return obj


def wind_field(rotation, strength: float, noise: float = 0.0):
    import bpy

    bpy.ops.object.effector_add(type="WIND", rotation=rotation)
    field = bpy.context.active_object
    field.field.strength, field.field.noise = strength, noise
    return field


def activate(obj) -> None:
    import bpy

    for other in bpy.context.selected_objects:
        other.select_set(False)
    obj.select_set(True)
    bpy.context.view_layer.objects.active = obj


def test_a_wind_field_pushes_a_free_body_along_its_direction(import_mesh, capfd):
    """A Wind field turned so that its +Z points along world +X, strength 2 (scene units/s^2), gravity off: the
    cube's centre travels 2 t^2 / 2 along +X and nowhere else; hidden, the field does nothing."""
    import bpy

    scene = bpy.context.scene
    scene.use_gravity, scene.render.fps, scene.frame_start, scene.frame_end = False, 24, 1, 9
    cube = import_mesh("cube_subdiv")
    cube.neurok.drag = 0.0
    field = wind_field((0.0, math.pi / 2, 0.0), 2.0)
    activate(cube)
    rest = evaluated_world(cube).mean(0)
    assert bpy.ops.neurok.simulate() == {"FINISHED"}
    assert f"wind from {field.name}" in reports(capfd)
    scene.frame_set(9)
    moved = evaluated_world(cube).mean(0) - rest
    expected = 0.5 * 2.0 * (8 / 24) ** 2
    assert moved[0] == pytest.approx(expected, rel=0.05)
    assert np.abs(moved[1:]).max() < 0.05 * expected
    field.hide_viewport = True
    assert bpy.ops.neurok.simulate() == {"FINISHED"}
    assert np.abs(evaluated_world(cube).mean(0) - rest).max() < 1e-4


def test_a_sphere_collider_holds_up_a_falling_sheet(addon, scene, capfd):
    import bpy

    scene.frame_start, scene.frame_end = 1, 19
    bpy.ops.mesh.primitive_uv_sphere_add(radius=0.25, segments=24, ring_count=12, location=(0.1, 0.0, 0.0))
    ball = collision(bpy.context.active_object)
    cloth = sheet("sheet", 0.8, 13)
    cloth.location.z = 0.3
    cloth.neurok.material, cloth.neurok.drag = "cloth", 1.0
    assert bpy.ops.neurok.simulate() == {"FINISHED"}
    assert f"colliders {ball.name} (sphere)" in reports(capfd)
    positions, _ = addon.shape_keys.read_positions(cloth)
    world = positions + np.array(cloth.location)
    inside = 0.25 - np.linalg.norm(world - [0.1, 0.0, 0.0], axis=-1)
    assert inside.max() < 0.02 * 0.8 * math.sqrt(2)  # no vertex deeper than 2% of the sheet's diagonal (penalty)
    assert world[-1, :, 2].max() > 0.2  # the middle rests on top of it
    assert world[-1, :, 2].min() < 0.0  # and the edges drape past its equator
    ball.collision.use = False  # a disabled Collision modifier collides with nothing
    assert bpy.ops.neurok.simulate() == {"FINISHED"}
    assert addon.shape_keys.read_positions(cloth)[0][-1, :, 2].max() < 0.2


@pytest.mark.parametrize("primitive, kwargs, shape", [
    ("primitive_plane_add", {"size": 2.0}, "plane"),
    ("primitive_cube_add", {"size": 1.0}, "box"),
    ("primitive_ico_sphere_add", {"radius": 0.5, "subdivisions": 2}, "sphere"),
    ("primitive_uv_sphere_add", {"radius": 0.5}, "sphere"),
    ("primitive_cone_add", {"radius1": 0.5, "depth": 1.0}, "convex"),
    ("primitive_monkey_add", {}, "convex"),
])
def test_collision_objects_are_classified_and_placed_in_the_simulated_space(addon, scene, primitive, kwargs, shape):
    """Each kind of collider, moved, turned and scaled, in a centimetre scene: its description is in metres and in
    the simulated space, and the points it says are inside are inside the mesh (checked at its vertices)."""
    import bpy

    scene.unit_settings.scale_length = 0.01
    getattr(bpy.ops.mesh, primitive)(location=(10.0, -20.0, 30.0), rotation=(0.3, 0.5, 0.7), **kwargs)
    obj = collision(bpy.context.active_object)
    obj.scale = (20.0, 20.0, 20.0)
    bpy.context.view_layer.update()
    space = addon.motion.simulation_space(np.eye(4)[None], 0.01)  # a still object: world space, in metres
    (collider,) = addon.scene_forces.colliders(bpy.context, space, exclude=None)
    assert collider.name == obj.name and collider.shape == shape
    m = np.array(obj.matrix_world)
    points = np.array([v.co for v in obj.data.vertices]) @ m[:3, :3].T * 0.01 + m[:3, 3] * 0.01  # metres
    (runtime,) = make_colliders([collider.spec])
    depth, _ = runtime.penetration(points)
    if shape == "convex":  # the hull fills concave parts: its extreme vertices are on its surface
        extremes = np.concatenate([points.argmin(0), points.argmax(0)])
        assert depth[extremes].max() < 0.02 * 0.2
    else:
        assert depth.max() < 0.02 * 0.2  # every vertex of the mesh on or outside the collider
    centre = (points.min(0) + points.max(0)) / 2
    if shape != "plane":
        assert runtime.penetration(centre[None])[0][0] > 0.03  # and its middle well inside (sizes ~0.2 m)
    else:
        normal = m[:3, :3] @ [0.0, 0.0, 1.0]
        below = centre - 0.01 * normal / np.linalg.norm(normal)
        assert runtime.penetration(below[None])[0][0] > 0.005  # solid behind the face, like a floor
    if shape == "sphere":
        assert collider.spec["radius"] == pytest.approx(0.1, rel=0.01)
        np.testing.assert_allclose(collider.spec["center"], [0.1, -0.2, 0.3], atol=1e-4)
    if shape == "box":
        np.testing.assert_allclose(collider.spec["size"], [0.2, 0.2, 0.2], rtol=1e-5)
