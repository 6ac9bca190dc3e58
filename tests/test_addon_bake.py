"""Bake, re-simulate and Clear without losing or mixing up an artist's work (issue 26, defects 1-3), in real bpy.

Bake and Clear do not depend on what was simulated, so most tests write a made-up deforming motion as NeuROK keys
(fast); the real worker runs where Simulate itself matters (re-simulate after bake, undo).
"""

import numpy as np
import pytest

from tests.test_addon_simulate import END, START, evaluated_world, rest_coordinates, simulate_and_capture

pytestmark = pytest.mark.bpy

FRAMES = (START, START + 4, END)


@pytest.fixture
def saved(scene, tmp_path):
    """The scene saved as tmp_path/scene.blend, so that // paths (the default cache folder) resolve."""
    import bpy

    scene.frame_start, scene.frame_end = START, END
    path = tmp_path / "scene.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(path))
    return path


def make_active(obj):
    import bpy

    for other in bpy.context.selected_objects:
        other.select_set(False)
    obj.select_set(True)
    bpy.context.view_layer.objects.active = obj


def write_motion(addon, obj, velocity, frames=FRAMES) -> dict:
    """NeuROK keys of a made-up motion (moving and deforming); returns the evaluated world vertices at ``frames``."""
    import bpy

    rest = rest_coordinates(obj).astype(np.float64)
    t = np.arange(END - START + 1)[:, None, None] / 24.0
    positions = rest + t * np.asarray(velocity) + 0.2 * np.sin(7.0 * t) * rest
    addon.shape_keys.write_animation(obj, positions, rest, START)
    captured = {}
    for f in frames:
        bpy.context.scene.frame_set(f)
        captured[f] = evaluated_world(obj)
    return captured


def cache_modifiers(obj) -> list:
    return [m for m in obj.modifiers if m.type == "MESH_CACHE"]


def test_two_baked_objects_keep_their_own_motion_after_save_and_reload(addon, saved, import_mesh, tmp_path):
    import bpy

    first, second = import_mesh("cube_subdiv"), import_mesh("cube_subdiv")
    second.location.x = 3.0
    expected = {}
    for obj, velocity in ((first, (0.0, 0.0, 2.0)), (second, (2.0, 0.0, 0.0))):
        make_active(obj)
        expected[obj.name] = write_motion(addon, obj, velocity)
        assert bpy.ops.neurok.bake() == {"FINISHED"}  # the default file: one of its own in //neurok_cache
    files = {obj.name: bpy.path.abspath(cache_modifiers(obj)[0].filepath) for obj in (first, second)}
    assert len(set(files.values())) == 2
    assert all(f.startswith(str(tmp_path / "neurok_cache")) for f in files.values())
    assert all(cache_modifiers(obj)[0].filepath.startswith("//") for obj in (first, second))  # relative to .blend
    # Baking the second object into the first one's cache is refused and leaves that file alone.
    before = open(files[first.name], "rb").read()
    assert bpy.ops.neurok.clear() == {"FINISHED"}
    expected[second.name] = write_motion(addon, second, (0.0, 2.0, 0.0))
    with pytest.raises(RuntimeError, match=f"the point cache that {first.name} plays"):
        bpy.ops.neurok.bake(filepath=cache_modifiers(first)[0].filepath)
    assert open(files[first.name], "rb").read() == before
    assert bpy.ops.neurok.bake() == {"FINISHED"}
    bpy.ops.wm.save_mainfile()
    bpy.ops.wm.read_factory_settings(use_empty=True)
    bpy.ops.wm.open_mainfile(filepath=str(saved))
    for name, captured in expected.items():
        obj = bpy.data.objects[name]
        for f, world in captured.items():
            bpy.context.scene.frame_set(f)
            np.testing.assert_allclose(evaluated_world(obj), world, atol=1e-5, err_msg=f"{name} frame {f}")


@pytest.fixture
def subdivided(import_mesh):
    import bpy

    obj = import_mesh("cube_subdiv")
    bpy.context.scene.frame_start, bpy.context.scene.frame_end = START, END
    obj.modifiers.new("Subdivision", "SUBSURF").levels = 1
    return obj


def test_bake_under_subdivision_plays_back_the_keys(addon, subdivided, tmp_path):
    import bpy

    expected = write_motion(addon, subdivided, (0.0, 0.0, 2.0), range(START, END + 1))
    assert len(expected[END]) > len(subdivided.data.vertices)  # what is compared is the subdivided result
    assert bpy.ops.neurok.bake(filepath=str(tmp_path / "cube.pc2")) == {"FINISHED"}
    assert [m.type for m in subdivided.modifiers] == ["MESH_CACHE", "SUBSURF"]
    assert subdivided.data.shape_keys is None
    for f, world in expected.items():
        bpy.context.scene.frame_set(f)
        np.testing.assert_allclose(evaluated_world(subdivided), world, atol=1e-5, err_msg=f"frame {f}")


def test_a_cache_that_does_not_play_back_is_removed_and_the_keys_kept(addon, subdivided, tmp_path, monkeypatch):
    import bpy

    write_motion(addon, subdivided, (0.0, 0.0, 2.0), ())
    write = addon.pc2.write_pc2
    monkeypatch.setattr(addon.pc2, "write_pc2", lambda path, positions, start: write(path, positions + 0.01, start))
    with pytest.raises(RuntimeError, match="did not play back"):
        bpy.ops.neurok.bake(filepath=str(tmp_path / "cube.pc2"))
    assert not cache_modifiers(subdivided) and not (tmp_path / "cube.pc2").exists()
    assert len(addon.shape_keys.neurok_key_blocks(subdivided)) == END - START + 1


def test_resimulate_after_bake_shows_the_new_motion_and_clear_removes_the_cache(addon, subdivided, tmp_path):
    import bpy

    rest = evaluated_world(subdivided)
    baked = write_motion(addon, subdivided, (0.0, 0.0, 2.0), (END,))[END]
    path = tmp_path / "cube.pc2"
    assert bpy.ops.neurok.bake(filepath=str(path)) == {"FINISHED"}
    top = max(v.co.z for v in subdivided.data.vertices)
    pins = subdivided.vertex_groups.new(name="top")
    pins.add([v.index for v in subdivided.data.vertices if v.co.z > top - 1e-3], 1.0, "REPLACE")
    # Pinned jelly deforms: a run started from the wrong shape would not move like the one below.
    subdivided.neurok.pin_group, subdivided.neurok.material = "top", "jelly"
    subdivided.neurok.initial_velocity = (2.0, 0.0, 0.0)
    bpy.context.scene.frame_set(END)  # the cache deforms the mesh here: the new run must still start at rest
    resimulated = simulate_and_capture(subdivided, (START, END))
    np.testing.assert_allclose(resimulated[START], rest, atol=1e-5)
    assert np.abs(resimulated[END] - baked).max() > 0.1
    (cache,) = cache_modifiers(subdivided)
    assert not cache.show_viewport and not cache.show_render  # disabled, not deleted: the old bake is still there
    assert bpy.ops.neurok.bake(filepath=str(path)) == {"FINISHED"}  # a new bake replaces it and plays again
    assert len(cache_modifiers(subdivided)) == 1 and cache_modifiers(subdivided)[0].show_viewport
    bpy.context.scene.frame_set(END)
    np.testing.assert_allclose(evaluated_world(subdivided), resimulated[END], atol=1e-5)
    assert bpy.ops.neurok.clear() == {"FINISHED"}
    assert not cache_modifiers(subdivided) and not path.exists()
    np.testing.assert_allclose(evaluated_world(subdivided), rest, atol=1e-6)
    # The same settings without a bake in the way: the run over the bake started from the true rest shape.
    np.testing.assert_allclose(simulate_and_capture(subdivided, (END,))[END], resimulated[END], atol=1e-5)


def test_clear_keeps_a_file_another_object_reads(addon, import_mesh, tmp_path):
    import bpy

    obj = import_mesh("cube_subdiv")
    write_motion(addon, obj, (0.0, 0.0, 2.0), ())
    path = tmp_path / "shared.pc2"
    assert bpy.ops.neurok.bake(filepath=str(path)) == {"FINISHED"}
    reader = bpy.data.objects.new("reader", obj.data.copy())
    bpy.context.scene.collection.objects.link(reader)
    mod = reader.modifiers.new("artist's cache", "MESH_CACHE")
    mod.cache_format, mod.filepath = "PC2", str(path)
    make_active(obj)
    assert bpy.ops.neurok.clear() == {"FINISHED"}
    assert not cache_modifiers(obj) and path.exists()


def test_undo_and_redo_of_simulate_bake_and_clear(cube_with_range, tmp_path):
    """Blender pushes an undo step after each UNDO operator in the UI; headless, ed.undo_push does it by hand."""
    import bpy

    obj_name, path = cube_with_range.name, tmp_path / "cube.pc2"

    def obj():
        return bpy.data.objects[obj_name]  # undo replaces the data blocks: look them up again

    def state():
        return (obj().data.shape_keys is not None, [m.type for m in obj().modifiers], obj().neurok.cache_file)

    bpy.ops.ed.undo_push(message="start")
    states = [state()]
    for step in (lambda: bpy.ops.neurok.simulate(), lambda: bpy.ops.neurok.bake(filepath=str(path)),
                 lambda: bpy.ops.neurok.clear()):
        assert step() == {"FINISHED"}
        bpy.ops.ed.undo_push(message="NeuROK")
        states.append(state())
    assert states == [(False, [], ""), (True, [], ""), (False, ["MESH_CACHE"], str(path)), (False, [], "")]
    for expected in reversed(states[:-1]):
        bpy.ops.ed.undo()
        assert state() == expected
    for expected in states[1:]:
        bpy.ops.ed.redo()
        assert state() == expected


@pytest.fixture
def cube_with_range(import_mesh):
    import bpy

    obj = import_mesh("cube_subdiv")
    bpy.context.scene.frame_start, bpy.context.scene.frame_end = START, END
    return obj

