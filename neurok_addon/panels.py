"""The NeuROK tab of the 3D View sidebar: material, forces, pinning and ground, frame range, and the actions."""

import bpy

from . import live, mesh_export, operators, shape_keys

# Keyed playback cost grows with the square of the number of NeuROK keys (every F-Curve finds its key by name):
# measured 34-36 ms per frame change at 1,000 keys and 136-142 ms at 2,000, against under 1 ms baked
# (docs/benchmarks.md, "Playback cost"). Past LONG_RANGE keys it is ~9 ms a frame change, and climbing fast.
KEYED_MS_PER_KEY_SQUARED = 35e-6
LONG_RANGE = 500


def keyed_playback_ms(keys: int) -> float:
    """Estimated time of one frame change for an object with ``keys`` NeuROK keys."""
    return KEYED_MS_PER_KEY_SQUARED * keys * keys


def pressure_text(pascals: float) -> str:
    for unit, scale in (("GPa", 1e9), ("MPa", 1e6), ("kPa", 1e3)):
        if pascals >= scale:
            return f"{pascals / scale:.3g} {unit}"
    return f"{pascals:.3g} Pa"


class _NeuROKPanel:
    bl_space_type = "VIEW_3D"
    bl_region_type = "UI"
    bl_category = "NeuROK"

    @classmethod
    def poll(cls, context):
        return context.active_object is not None and context.active_object.type == "MESH"


class NEUROK_PT_main(_NeuROKPanel, bpy.types.Panel):
    bl_label = "NeuROK"

    @classmethod
    def poll(cls, context):
        return True  # the tab stays, saying why nothing can be simulated, instead of vanishing

    def draw(self, context):
        layout = self.layout
        obj, job = context.active_object, context.window_manager.neurok_job
        if obj is None or obj.type != "MESH":
            layout.label(text=operators.not_editable_reason(context), icon="INFO")
            return
        live.prestart(context)  # the artist is looking at NeuROK: have the model loaded by the time they press Simulate
        settings = obj.neurok
        layout.use_property_split = True
        layout.prop(settings, "material", text="Preset" if settings.preset_edited() else "Material")
        if settings.preset_edited():
            layout.label(text="Custom values (pick a preset to reset them)", icon="MODIFIER")
        col = layout.column(align=True)
        row = col.row(align=True)
        row.prop(settings, "stiffness", text=f"Stiffness (Pa) {pressure_text(settings.stiffness)}")
        row.operator(operators.NEUROK_OT_scale_stiffness.bl_idname, text="", icon="REMOVE").factor = 0.5
        row.operator(operators.NEUROK_OT_scale_stiffness.bl_idname, text="", icon="ADD").factor = 2.0
        col.prop(settings, "density", text="Density (kg/m³)")
        col.prop(settings, "damping")

        layout.use_property_split = False
        if job.running:
            layout.progress(factor=job.progress, type="BAR", text=f"{job.object_name}: {job.message or 'running'}")
            layout.label(text="Esc cancels", icon="INFO")
        evaluated = obj.evaluated_get(context.evaluated_depsgraph_get())
        if len(evaluated.data.vertices) != len(obj.data.vertices):
            layout.label(text="Simulates the cage: Subdivision and other modifiers that change the vertex count "
                              "apply on top", icon="MOD_SUBSURF")
        targets = operators.simulation_targets(context)
        if len(targets) > 1:
            layout.label(text=f"Simulates {len(targets)} selected meshes, one after another", icon="INFO")
        row = layout.row(align=True)
        row.scale_y = 1.4
        row.operator(operators.NEUROK_OT_simulate.bl_idname, icon="PHYSICS")
        layout.prop(settings, "auto_resimulate")
        if settings.auto_resimulate and job.live_message:
            layout.label(text=job.live_message, icon="FILE_REFRESH")
        row = layout.row(align=True)
        row.operator(operators.NEUROK_OT_clear.bl_idname, icon="X")
        row.operator(operators.NEUROK_OT_bake.bl_idname, icon="FILE_CACHE")
        keys = shape_keys.neurok_key_blocks(obj)
        if keys:
            layout.label(text=f"{len(keys)} NeuROK keys, frames {shape_keys.key_frame(keys[0])}-"
                              f"{shape_keys.key_frame(keys[-1])}", icon="SHAPEKEY_DATA")
            if len(keys) > LONG_RANGE:
                box = layout.box()
                box.alert = True
                box.label(text=f"Playback: ~{keyed_playback_ms(len(keys)):.0f} ms per frame change (under 1 ms "
                               "baked)", icon="ERROR")
                box.operator(operators.NEUROK_OT_bake.bl_idname, icon="FILE_CACHE")
        cache = obj.modifiers.get(mesh_export.CACHE_MODIFIER)
        if cache is not None:
            state = "plays" if cache.show_viewport else "disabled: the shape keys play"
            layout.label(text=f"Baked to {bpy.path.basename(cache.filepath)} ({state})", icon="FILE_CACHE")
        layout.use_property_split = True
        layout.prop(context.scene.neurok, "cache_dir")


class NEUROK_PT_forces(_NeuROKPanel, bpy.types.Panel):
    bl_label = "Forces"
    bl_parent_id = "NEUROK_PT_main"

    def draw(self, context):
        layout = self.layout
        scene, settings = context.scene, context.active_object.neurok
        layout.use_property_split = True
        layout.prop(settings, "use_scene_gravity")
        if settings.use_scene_gravity:
            layout.prop(scene, "use_gravity", text="Scene Gravity On")
            sub = layout.column()
            sub.active = scene.use_gravity
            sub.prop(scene, "gravity")
        else:
            layout.prop(settings, "gravity", text="Custom Gravity")
        gravity = settings.effective_gravity(scene)
        layout.label(text="Simulated with (" + ", ".join(f"{g:.3g}" for g in gravity) + ") m/s²", icon="FORCE_FORCE")
        if problem := settings.gravity_problem(scene):
            box = layout.box()
            box.alert = True
            box.label(text=problem.split(":")[0], icon="ERROR")
            box.operator(operators.NEUROK_OT_earth_gravity.bl_idname, icon="CHECKMARK")
        layout.prop(settings, "drag", text="Air Drag (1/s)")
        layout.prop(settings, "initial_velocity")
        layout.prop(settings, "angular_velocity", text="Initial Spin (rad/s)")


class NEUROK_PT_constraints(_NeuROKPanel, bpy.types.Panel):
    bl_label = "Pinning & Ground"
    bl_parent_id = "NEUROK_PT_main"

    def draw(self, context):
        layout = self.layout
        obj = context.active_object
        layout.use_property_split = True
        layout.prop_search(obj.neurok, "pin_group", obj, "vertex_groups", text="Pin Group")
        row = layout.row(heading="Ground")
        row.prop(obj.neurok, "use_ground", text="")
        sub = row.row()
        sub.active = obj.neurok.use_ground
        sub.prop(obj.neurok, "ground_height", text="")


class NEUROK_PT_frames(_NeuROKPanel, bpy.types.Panel):
    bl_label = "Frames"
    bl_parent_id = "NEUROK_PT_main"

    def draw(self, context):
        layout = self.layout
        settings = context.active_object.neurok
        layout.use_property_split = True
        layout.prop(settings, "use_scene_range")
        col = layout.column(align=True)
        if settings.use_scene_range:
            col.enabled = False
            col.prop(context.scene, "frame_start")
            col.prop(context.scene, "frame_end", text="End")
        else:
            col.prop(settings, "frame_start")
            col.prop(settings, "frame_end")
        first, last = settings.frame_range(context.scene)
        if last - first + 1 > LONG_RANGE:
            layout.label(text=f"{last - first + 1} keyed frames play slowly (~{keyed_playback_ms(last - first + 1):.0f}"
                              " ms a frame): Bake after simulating", icon="INFO")


register, unregister = bpy.utils.register_classes_factory(
    (NEUROK_PT_main, NEUROK_PT_forces, NEUROK_PT_constraints, NEUROK_PT_frames))
