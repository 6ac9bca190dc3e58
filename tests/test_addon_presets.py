"""Presets that look right (issue 25, item 5): with the default air drag, a pinned cloth settles within a few
seconds, as cloth in air does, in real bpy through the real worker and the shipped model."""

import numpy as np
import pytest

from tests.test_addon_motion import sheet

pytestmark = pytest.mark.bpy


def test_a_pinned_cloth_with_default_settings_settles_within_a_few_seconds(addon, scene):
    import bpy

    scene.render.fps, scene.frame_start, scene.frame_end = 24, 1, 97  # 4 s
    obj = sheet("cloth", 1.0, 15)
    group = obj.vertex_groups.new(name="pins")
    group.add([v.index for v in obj.data.vertices if v.co.y > 0.49], 1.0, "REPLACE")
    obj.neurok.pin_group, obj.neurok.material = "pins", "cloth"  # everything else as a new object has it
    assert obj.neurok.drag > 0
    assert bpy.ops.neurok.simulate() == {"FINISHED"}
    positions, _ = addon.shape_keys.read_positions(obj)
    speed = np.linalg.norm(np.diff(positions, axis=0), axis=-1).max(1) * 24  # fastest vertex, m/s
    lowest = positions[:, :, 2].min(1)
    assert speed[72:].max() < 0.4 * speed[:24].max(), speed.round(2)  # the fourth second: calmer by far
    assert np.ptp(lowest[72:]) < 0.05, lowest.round(3)  # and it hangs, no longer swinging up and down
