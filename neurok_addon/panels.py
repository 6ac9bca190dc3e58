"""The NeuROK tab of the 3D View sidebar: material, forces, pinning and ground, frame range, and the actions."""

import bpy

from . import operators, shape_keys


class _NeuROKPanel:
    bl_space_type = "VIEW_3D"
    bl_region_type = "UI"
    bl_category = "NeuROK"

    @classmethod
    def poll(cls, context):
        return context.active_object is not None and context.active_object.type == "MESH"


class NEUROK_PT_main(_NeuROKPanel, bpy.types.Panel):
    bl_label = "NeuROK"

    def draw(self, context):
        layout = self.layout
        obj, job = context.active_object, context.window_manager.neurok_job
        settings = obj.neurok
        layout.use_property_split = True
        layout.prop(settings, "material")
        col = layout.column(align=True)
        col.prop(settings, "stiffness", text="Stiffness (Pa)")
        col.prop(settings, "density", text="Density (kg/m³)")
        col.prop(settings, "damping")

        layout.use_property_split = False
        if job.running:
            layout.progress(factor=job.progress, type="BAR", text=f"{job.object_name}: {job.message or 'running'}")
            layout.label(text="Esc cancels", icon="INFO")
        row = layout.row(align=True)
        row.scale_y = 1.4
        row.operator(operators.NEUROK_OT_simulate.bl_idname, icon="PHYSICS")
        row = layout.row(align=True)
        row.operator(operators.NEUROK_OT_clear.bl_idname, icon="X")
        row.operator(operators.NEUROK_OT_bake.bl_idname, icon="FILE_CACHE")
        keys = shape_keys.neurok_key_blocks(obj)
        if keys:
            layout.label(text=f"{len(keys)} NeuROK keys, frames {shape_keys.key_frame(keys[0])}-"
                              f"{shape_keys.key_frame(keys[-1])}", icon="SHAPEKEY_DATA")


class NEUROK_PT_forces(_NeuROKPanel, bpy.types.Panel):
    bl_label = "Forces"
    bl_parent_id = "NEUROK_PT_main"

    def draw(self, context):
        layout = self.layout
        settings = context.active_object.neurok
        layout.use_property_split = True
        layout.prop(settings, "use_scene_gravity")
        if settings.use_scene_gravity:
            layout.prop(context.scene, "gravity")
        else:
            layout.prop(settings, "gravity")
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


register, unregister = bpy.utils.register_classes_factory(
    (NEUROK_PT_main, NEUROK_PT_forces, NEUROK_PT_constraints, NEUROK_PT_frames))
