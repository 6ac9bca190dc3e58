"""Add-on preferences: which Python runs the worker, and the "Set up runtime" button that creates one.

The worker needs torch, which Blender's own Python lacks. The default runtime is a virtual environment under the
extension's user directory, created by Blender's Python and filled by pip (only with Online Access allowed);
alternatively an artist points to any interpreter that already has the runtime requirements.
"""

import os
import subprocess
import sys

import bpy

ADDON_ID = __package__.rpartition(".")[0]  # the extension package (bl_ext.<repo>.neurok) owns the preferences
REQUIREMENTS = os.path.join(os.path.dirname(__file__), "runtime-requirements.txt")
# pip would otherwise pick torch's multi-GB CUDA build on Linux; the CPU build is all NeuROK needs.
TORCH_INDEX = "https://download.pytorch.org/whl/cpu"


def runtime_dir() -> str:
    return bpy.utils.extension_path_user(ADDON_ID, path="runtime", create=True)


def venv_python(venv: str) -> str:
    return os.path.join(venv, "Scripts", "python.exe") if os.name == "nt" else os.path.join(venv, "bin", "python")


def worker_python(context: bpy.types.Context) -> str:
    """The interpreter for the worker: the preference, else $NEUROK_PYTHON, else the set-up runtime."""
    prefs = context.preferences.addons[ADDON_ID].preferences
    chosen = bpy.path.abspath(prefs.python_path) if prefs.python_path else os.environ.get("NEUROK_PYTHON", "")
    return chosen or venv_python(runtime_dir())


def worker_timeout(context: bpy.types.Context) -> float:
    return float(context.preferences.addons[ADDON_ID].preferences.timeout)


class NEUROK_OT_setup_runtime(bpy.types.Operator):
    """Create a Python environment for NeuROK and install torch and the runtime requirements into it (downloads)"""

    bl_idname = "neurok.setup_runtime"
    bl_label = "Set up Runtime"

    _process: subprocess.Popen | None = None
    _timer = None

    @classmethod
    def poll(cls, context):
        if not bpy.app.online_access:
            cls.poll_message_set("Allow Online Access in Preferences > System to download the runtime")
            return False
        return True

    def invoke(self, context, event):
        venv = runtime_dir()
        python = venv_python(venv)
        # venv creation and pip run in one shell-free child process chain, so Blender stays responsive.
        script = (f"import subprocess, sys, venv; venv.create({venv!r}, with_pip=True, clear=True); "
                  f"sys.exit(subprocess.call([{python!r}, '-m', 'pip', 'install', '--extra-index-url', "
                  f"{TORCH_INDEX!r}, '-r', {REQUIREMENTS!r}]))")
        self._log = os.path.join(os.path.dirname(venv), "runtime-setup.log")
        with open(self._log, "wb") as log:
            self._process = subprocess.Popen([sys.executable, "-c", script], stdout=log, stderr=subprocess.STDOUT)
        self._timer = context.window_manager.event_timer_add(1.0, window=context.window)
        context.window_manager.modal_handler_add(self)
        self.report({"INFO"}, "Setting up the NeuROK runtime (downloading torch, this takes a few minutes)")
        return {"RUNNING_MODAL"}

    def modal(self, context, event):
        if event.type != "TIMER" or self._process.poll() is None:
            return {"PASS_THROUGH"}
        context.window_manager.event_timer_remove(self._timer)
        if self._process.returncode != 0:
            self.report({"ERROR"}, f"Runtime setup failed; see {self._log}")
            return {"CANCELLED"}
        self.report({"INFO"}, "NeuROK runtime is ready")
        return {"FINISHED"}


class NeuROKPreferences(bpy.types.AddonPreferences):
    bl_idname = ADDON_ID

    python_path: bpy.props.StringProperty(
        name="Python", subtype="FILE_PATH", default="",
        description="Python interpreter with torch for the NeuROK worker; empty uses the runtime set up below")
    timeout: bpy.props.IntProperty(
        name="Timeout", default=300, min=10, max=86_400, subtype="TIME_ABSOLUTE",
        description="Seconds without any sign of progress after which the worker is stopped and restarted")

    def draw(self, context):
        layout = self.layout
        layout.prop(self, "python_path")
        layout.prop(self, "timeout")
        python = worker_python(context)
        row = layout.row()
        row.label(text=f"Worker Python: {python}", icon="CHECKMARK" if os.path.isfile(python) else "ERROR")
        row = layout.row()
        row.operator(NEUROK_OT_setup_runtime.bl_idname, icon="IMPORT")
        if not bpy.app.online_access:
            layout.label(text="Needs Online Access (Preferences > System)", icon="INFO")


register, unregister = bpy.utils.register_classes_factory((NEUROK_OT_setup_runtime, NeuROKPreferences))
