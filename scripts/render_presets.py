"""Filmstrips of each NeuROK material preset beside Blender's own Cloth or Soft Body on the same mesh (docs/presets.md).

``.venv/bin/python scripts/render_presets.py [--out docs/images]``: through the installed extension in headless
Blender, one scene per preset; NeuROK simulates one copy of the mesh with the preset and default settings, Blender's
simulator the other; both are rendered with Workbench at the same frames into ``presets_<preset>.png`` (top row
NeuROK, bottom row Blender). Setups:

- cloth, silk: a 1 m sheet of 32 x 32 vertices pinned along one edge, released flat (Blender: Cloth with its own
  Cotton / Silk preset, the edge as Pin Group).
- rubber, jelly: an icosphere of 0.6 m diameter dropped from 0.3 m onto a floor with a Collision modifier, which
  NeuROK takes as its plane collider (Blender: Soft Body without goal, default edges for rubber; Pull, Push and
  Bending 0.2 for jelly).
- elastic_beam: a 1 x 0.1 x 0.1 m beam pinned at one end (Blender: Soft Body, the end as Goal group, Pull and Push
  0.9, Bending 5).
"""

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parent))
import demo  # noqa: E402  (scripts/ is not a package)

FPS = 24
FRAMES = (1, 7, 13, 25, 49, 73)  # 0, 0.25, 0.5, 1, 2 and 3 s
SIZE = (200, 150)
PRESETS = ("cloth", "silk", "rubber", "jelly", "elastic_beam")


def new_scene():
    import addon_utils
    import bpy

    bpy.ops.wm.read_factory_settings(use_empty=True)
    addon_utils.enable(demo.ADDON_MODULE, default_set=True)
    bpy.context.preferences.addons[demo.ADDON_MODULE].preferences.python_path = sys.executable
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end, scene.render.fps = FRAMES[0], FRAMES[-1], FPS
    return scene


def add_floor(height: float, collide: bool):
    import bpy

    bpy.ops.mesh.primitive_plane_add(size=40.0, location=(0.0, 0.0, height))
    floor = bpy.context.active_object
    if collide:
        floor.modifiers.new("Collision", "COLLISION")
    floor.color = (0.8, 0.8, 0.8, 1.0)
    return floor


def pin(obj, test) -> str:
    group = obj.vertex_groups.new(name="pins")
    group.add([v.index for v in obj.data.vertices if test(v.co)], 1.0, "REPLACE")
    return group.name


def blender_cloth_preset(settings, name: str) -> None:
    """Apply one of Blender's own Cloth presets (scripts/presets/cloth/<name>.py) to ``settings``."""
    import bpy

    folder = next(p for p in bpy.utils.preset_paths("cloth") if os.path.isfile(os.path.join(p, f"{name}.py")))
    source = Path(folder, f"{name}.py").read_text().replace("import bpy\n", "")
    exec(source, {"bpy": SimpleNamespace(context=SimpleNamespace(cloth=SimpleNamespace(settings=settings)))})


def build(preset: str):
    """The scene for one preset: (NeuROK's object, Blender's object, camera location, camera target)."""
    import bpy

    if preset in ("cloth", "silk"):
        add_floor(-0.2, collide=False)
        bpy.ops.mesh.primitive_grid_add(x_subdivisions=31, y_subdivisions=31, size=1.0, location=(0.0, 0.0, 1.2))
        mesh_obj = bpy.context.active_object
        group = pin(mesh_obj, lambda co: co.y > 0.499)
        camera = ((3.4, -2.2, 1.6), (0.0, 0.2, 0.5))
    elif preset in ("rubber", "jelly"):
        add_floor(0.0, collide=True)
        bpy.ops.mesh.primitive_ico_sphere_add(subdivisions=3, radius=0.3, location=(0.0, 0.0, 0.6))
        mesh_obj, group = bpy.context.active_object, ""
        camera = ((1.6, -1.6, 0.8), (0.0, 0.0, 0.3))
    else:
        add_floor(0.0, collide=False)
        bpy.ops.mesh.primitive_cube_add(size=1.0, location=(0.5, 0.0, 1.0), scale=(1.0, 0.1, 0.1))
        bpy.ops.object.transform_apply(scale=True)
        bpy.ops.object.modifier_add(type="SUBSURF")  # 4 levels of simple cuts: enough vertices along the beam
        mesh_obj = bpy.context.active_object
        mesh_obj.modifiers[-1].subdivision_type, mesh_obj.modifiers[-1].levels = "SIMPLE", 4
        bpy.ops.object.modifier_apply(modifier=mesh_obj.modifiers[-1].name)
        group = pin(mesh_obj, lambda co: co.x < 0.001)
        camera = ((0.5, -2.4, 1.0), (0.5, 0.0, 0.8))
    neurok_obj = mesh_obj
    neurok_obj.neurok.material, neurok_obj.neurok.pin_group = preset, group
    neurok_obj.color = (0.85, 0.35, 0.25, 1.0)
    blender_obj = mesh_obj.copy()
    blender_obj.data = mesh_obj.data.copy()
    bpy.context.scene.collection.objects.link(blender_obj)
    blender_obj.color = (0.25, 0.45, 0.85, 1.0)
    if preset in ("cloth", "silk"):
        mod = blender_obj.modifiers.new("Cloth", "CLOTH")
        blender_cloth_preset(mod.settings, {"cloth": "Cotton", "silk": "Silk"}[preset])
        mod.settings.vertex_group_mass = group
    else:
        mod = blender_obj.modifiers.new("Softbody", "SOFT_BODY")
        soft = mod.settings
        soft.use_goal = bool(group)
        if group:  # default goal 1: weight-1 vertices hold, weight-0 ones are free (see benchmarks/run.py)
            soft.vertex_group_goal, soft.goal_default = group, 1.0
        if preset == "jelly":
            soft.pull = soft.push = soft.bend = 0.2
        elif preset == "elastic_beam":
            soft.pull = soft.push = 0.9
            soft.bend = 5.0
    mod.point_cache.frame_start, mod.point_cache.frame_end = FRAMES[0], FRAMES[-1]
    return neurok_obj, blender_obj, camera


def render_rows(scene, rows, path: Path, workdir: Path) -> None:
    """Render FRAMES once per (shown object, hidden object) in ``rows``; the first row on top, one PNG."""
    import bpy
    import numpy as np

    scene.render.engine = "BLENDER_WORKBENCH"
    scene.display.shading.color_type = "OBJECT"
    scene.render.resolution_x, scene.render.resolution_y = SIZE
    scene.render.resolution_percentage = 100
    scene.render.image_settings.file_format = "PNG"
    strips = []
    for shown, hidden in rows:
        shown.hide_render, hidden.hide_render = False, True
        tiles = []
        for frame in FRAMES:
            scene.frame_set(frame)
            scene.render.filepath = str(workdir / f"frame_{frame:04d}.png")
            bpy.ops.render.render(write_still=True)
            image = bpy.data.images.load(scene.render.filepath)
            pixels = np.empty(SIZE[0] * SIZE[1] * 4, np.float32)
            image.pixels.foreach_get(pixels)
            tiles.append(pixels.reshape(SIZE[1], SIZE[0], 4))
            bpy.data.images.remove(image)
        strips.append(np.concatenate(tiles, axis=1))
    sheet = np.concatenate(strips[::-1], axis=0)  # Blender's images start at the bottom row
    image = bpy.data.images.new(path.stem, sheet.shape[1], sheet.shape[0], alpha=True)
    image.pixels.foreach_set(sheet.ravel())
    image.filepath_raw, image.file_format = str(path), "PNG"
    image.save()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="docs/images")
    parser.add_argument("--presets", default=",".join(PRESETS))
    args = parser.parse_args()
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    user_dir = tempfile.TemporaryDirectory(prefix="neurok-presets-blender-")
    os.environ["BLENDER_USER_RESOURCES"] = user_dir.name
    import bpy
    from mathutils import Vector

    with tempfile.TemporaryDirectory() as zip_dir:
        bpy.ops.extensions.package_install_files(filepath=str(demo.build_extension(Path(zip_dir))),
                                                 repo="user_default", enable_on_install=True)
    for preset in args.presets.split(","):
        scene = new_scene()
        neurok_obj, blender_obj, (eye, target) = build(preset)
        camera = bpy.data.objects.new("Camera", bpy.data.cameras.new("Camera"))
        scene.collection.objects.link(camera)
        camera.location = eye
        camera.rotation_euler = (Vector(target) - camera.location).to_track_quat("-Z", "Y").to_euler()
        scene.camera = camera
        for obj in scene.objects:
            obj.select_set(obj == neurok_obj)
        bpy.context.view_layer.objects.active = neurok_obj
        started = time.perf_counter()
        bpy.ops.neurok.simulate()
        neurok_s = time.perf_counter() - started
        cache = next(m for m in blender_obj.modifiers if m.type in ("CLOTH", "SOFT_BODY")).point_cache
        started = time.perf_counter()
        # Baked, not stepped through: hiding an object for the other row's render would free a cache still in
        # memory, and Blender's simulators cannot jump to a frame without one.
        with bpy.context.temp_override(scene=scene, active_object=blender_obj, object=blender_obj, point_cache=cache):
            assert bpy.ops.ptcache.bake(bake=True) == {"FINISHED"} and cache.is_baked
        blender_s = time.perf_counter() - started
        with tempfile.TemporaryDirectory() as frames_dir:
            render_rows(scene, [(neurok_obj, blender_obj), (blender_obj, neurok_obj)], out / f"presets_{preset}.png",
                        Path(frames_dir))
        print(f"{preset}: {len(neurok_obj.data.vertices)} vertices, NeuROK {neurok_s:.1f} s, Blender "
              f"{blender_s:.1f} s -> {out / f'presets_{preset}.png'}")
    sys.modules[demo.ADDON_MODULE + ".neurok_addon.client"].shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
