"""Time the first Simulate of a session with and without the worker pre-started by the NeuROK panel.

Through the installed extension in headless Blender (``.venv/bin/python scripts/bench_first_simulate.py``): a grid
pinned along one edge, cloth preset, 100 frames at 24 fps, ``bpy.ops.neurok.simulate`` timed from the call to the
keys written. Per repeat, in turn: *cold* (no worker: the call starts it and imports torch);
*pre-started, pressed at once* (the panel's pre-start, then Simulate straight away); *pre-started* (the panel's
pre-start, then PAUSE seconds, as an artist setting a pin group, before Simulate). Also the warm-up's own duration.
Prints a markdown table of medians and every run.
"""

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import demo  # noqa: E402  (scripts/ is not a package)

PAUSE = 8.0  # s between the panel appearing and the artist pressing Simulate


def grid(side: int):
    import bpy

    bpy.ops.wm.read_factory_settings(use_empty=True)
    import addon_utils

    addon_utils.enable(demo.ADDON_MODULE, default_set=True)
    bpy.context.preferences.addons[demo.ADDON_MODULE].preferences.python_path = sys.executable
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end, scene.render.fps = 1, 101, 24
    bpy.ops.mesh.primitive_grid_add(x_subdivisions=side - 1, y_subdivisions=side - 1, size=1.0)
    obj = bpy.context.active_object
    group = obj.vertex_groups.new(name="pins")
    group.add([v.index for v in obj.data.vertices if v.co.y > 0.499], 1.0, "REPLACE")
    obj.neurok.pin_group, obj.neurok.material = "pins", "cloth"
    return obj


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--sides", default="32,100", help="grid sides (32: 1,024 vertices; 100: 10,000)")
    args = parser.parse_args()
    user_dir = tempfile.TemporaryDirectory(prefix="neurok-bench-blender-")
    os.environ["BLENDER_USER_RESOURCES"] = user_dir.name
    import bpy

    with tempfile.TemporaryDirectory() as out:
        zip_path = demo.build_extension(Path(out))
        bpy.ops.extensions.package_install_files(filepath=str(zip_path), repo="user_default",
                                                 enable_on_install=True)
    addon = sys.modules[demo.ADDON_MODULE + ".neurok_addon"]
    rows = []
    for side in (int(s) for s in args.sides.split(",")):
        runs = {"cold": [], "pre-started, pressed at once": [], f"pre-started, pressed after {PAUSE:g} s": [],
                "warm-up itself": []}
        for _ in range(args.repeats):
            for case in list(runs)[:3]:
                obj = grid(side)
                addon.client.shutdown()
                if case != "cold":
                    addon.live.prestart(bpy.context)  # what drawing the panel does
                    if case != "pre-started, pressed at once":
                        time.sleep(PAUSE)
                t = time.perf_counter()
                assert bpy.ops.neurok.simulate() == {"FINISHED"}
                runs[case].append(time.perf_counter() - t)
            addon.client.shutdown()  # the warm-up alone, timed to its answer
            warm_client = addon.client.get_client(sys.executable, 300.0)
            started = time.perf_counter()
            warm_client.wait(warm_client.warm_up())
            runs["warm-up itself"].append(time.perf_counter() - started)
        rows.append((len(obj.data.vertices), runs))
        addon.client.shutdown()
    print("| vertices | case | median s | runs s |\n|---|---|---|---|")
    for count, runs in rows:
        for case, times in runs.items():
            print(f"| {count:,} | {case} | {statistics.median(times):.2f} | {', '.join(f'{t:.2f}' for t in times)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
