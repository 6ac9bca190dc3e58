"""NeuROK demo (``make demo``): animate a sample cloth with the add-on in headless Blender and render a filmstrip.

Steps, all through the real extension: build the extension zip with Blender's own tool (``OUT/neurok-*.zip``, the
file an artist installs), install it into a throwaway Blender user directory, import
``assets/meshes/cloth_grid.obj``, pin its back edge, press Simulate (the add-on starts the worker with this
interpreter), save ``OUT/demo.blend`` and render a few frames side by side to ``OUT/demo.png``.
"""

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ADDON_MODULE = "bl_ext.user_default.neurok"
FRAMES = (1, 12, 24, 36, 48)
SIZE = (320, 240)


def build_extension(out: Path) -> Path:
    import bpy

    tool = Path(bpy.utils.system_resource("SCRIPTS")) / "addons_core" / "bl_pkg" / "cli" / "blender_ext.py"
    for old in out.glob("neurok-*.zip"):
        old.unlink()
    subprocess.run([sys.executable, str(tool), "build", "--source-dir", str(ROOT), "--output-dir", str(out)],
                   check=True, capture_output=True)
    return next(out.glob("neurok-*.zip"))


def setup_scene():
    import bpy
    from mathutils import Vector

    bpy.ops.wm.read_factory_settings(use_empty=True)
    import addon_utils

    addon_utils.enable(ADDON_MODULE, default_set=True)
    bpy.context.preferences.addons[ADDON_MODULE].preferences.python_path = sys.executable
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = FRAMES[0], FRAMES[-1]
    scene.render.fps = 24

    bpy.ops.wm.obj_import(filepath=str(ROOT / "assets" / "meshes" / "cloth_grid.obj"), forward_axis="Y",
                          up_axis="Z")
    cloth = bpy.context.selected_objects[0]
    bpy.context.view_layer.objects.active = cloth
    edge = cloth.vertex_groups.new(name="pinned edge")
    edge.add([v.index for v in cloth.data.vertices if v.co.y > 0.49], 1.0, "REPLACE")
    cloth.neurok.pin_group = edge.name
    cloth.neurok.material = "cloth"
    cloth.color = (0.85, 0.35, 0.25, 1.0)

    bpy.ops.mesh.primitive_plane_add(size=4.0, location=(0.0, 0.0, -0.05))
    camera = bpy.data.objects.new("Camera", bpy.data.cameras.new("Camera"))
    scene.collection.objects.link(camera)
    camera.location = (2.0, -2.2, 1.4)
    camera.rotation_euler = (Vector((0.0, 0.0, 0.55)) - camera.location).to_track_quat("-Z", "Y").to_euler()
    scene.camera = camera
    bpy.context.view_layer.objects.active = cloth
    cloth.select_set(True)
    return scene, cloth


def render_filmstrip(scene, path: Path, workdir: Path) -> None:
    """Render FRAMES with Workbench (fast on a CPU) and lay them out left to right in one PNG."""
    import bpy
    import numpy as np

    scene.render.engine = "BLENDER_WORKBENCH"
    scene.display.shading.color_type = "OBJECT"
    scene.render.resolution_x, scene.render.resolution_y = SIZE
    scene.render.resolution_percentage = 100
    scene.render.image_settings.file_format = "PNG"
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
    strip = np.concatenate(tiles, axis=1)
    image = bpy.data.images.new("NeuROK filmstrip", strip.shape[1], strip.shape[0], alpha=True)
    image.pixels.foreach_set(strip.ravel())
    image.filepath_raw, image.file_format = str(path), "PNG"
    image.save()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="out", help="output folder")
    out = Path(parser.parse_args().out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    # Blender reads its user directory when bpy is imported: keep this demo's install out of the user's Blender.
    user_dir = tempfile.TemporaryDirectory(prefix="neurok-demo-blender-")
    os.environ["BLENDER_USER_RESOURCES"] = user_dir.name
    import bpy

    zip_path = build_extension(out)
    bpy.ops.extensions.package_install_files(filepath=str(zip_path), repo="user_default", enable_on_install=True)
    scene, cloth = setup_scene()
    print(f"NeuROK demo: simulating {cloth.name} ({len(cloth.data.vertices)} vertices, frames "
          f"{scene.frame_start}-{scene.frame_end}) with the worker on {sys.executable}")
    try:
        bpy.ops.neurok.simulate()
    except RuntimeError as exc:  # the operator's error report: e.g. no shipped model yet
        print(f"NeuROK demo: Simulate failed, nothing to show: {exc}", file=sys.stderr)
        return 1
    bpy.ops.wm.save_as_mainfile(filepath=str(out / "demo.blend"))
    with tempfile.TemporaryDirectory(prefix="neurok-demo-frames-") as frames_dir:
        render_filmstrip(scene, out / "demo.png", Path(frames_dir))
    sys.modules[ADDON_MODULE + ".neurok_addon.client"].shutdown()
    print(f"NeuROK demo: wrote {out / 'demo.blend'} (animation as NeuROK_ shape keys)")
    print(f"NeuROK demo: wrote {out / 'demo.png'} (frames {', '.join(map(str, FRAMES))})")
    print(f"NeuROK demo: the extension to install in Blender is {zip_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
