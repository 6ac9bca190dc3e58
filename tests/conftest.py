"""Shared fixtures: the extension zip built by Blender's own tool, installed into a throwaway Blender user directory.

bpy state is global to the process, so Blender is set up once per session: the add-on is registered exactly the way
Blender registers an installed extension (module ``bl_ext.user_default.neurok``), and every test starts from a
fresh factory scene (which disables extensions, so the add-on is enabled again each time).
"""

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MESHES = ROOT / "assets" / "meshes"
ADDON_MODULE = "bl_ext.user_default.neurok"

# Blender reads its user directory when bpy is first imported, so this must happen before any test imports bpy.
_USER_RESOURCES = tempfile.mkdtemp(prefix="neurok-blender-user-")
os.environ["BLENDER_USER_RESOURCES"] = _USER_RESOURCES


def pytest_unconfigure(config):
    shutil.rmtree(_USER_RESOURCES, ignore_errors=True)


def _run_blender_ext(*args: str) -> subprocess.CompletedProcess:
    import bpy

    tool = Path(bpy.utils.system_resource("SCRIPTS")) / "addons_core" / "bl_pkg" / "cli" / "blender_ext.py"
    return subprocess.run([sys.executable, str(tool), *args], capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="session")
def blender_ext():
    """Run Blender's extension command line tool (``validate``, ``build``...) under this interpreter."""
    return _run_blender_ext


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return ROOT


@pytest.fixture(scope="session")
def extension_zip(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("extension")
    proc = _run_blender_ext("build", "--source-dir", str(ROOT), "--output-dir", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (zip_path,) = out.glob("*.zip")
    return zip_path


@pytest.fixture(scope="session")
def addon(extension_zip):
    """The installed, enabled extension's add-on package (``bl_ext.user_default.neurok.neurok_addon``)."""
    import importlib

    import bpy

    result = bpy.ops.extensions.package_install_files(filepath=str(extension_zip), repo="user_default",
                                                      enable_on_install=True)
    assert result == {"FINISHED"}
    yield importlib.import_module(ADDON_MODULE + ".neurok_addon")
    importlib.import_module(ADDON_MODULE + ".neurok_addon.client").shutdown()


@pytest.fixture
def scene(addon):
    """An empty factory scene with the add-on enabled and its worker Python set to this test's interpreter."""
    import addon_utils
    import bpy

    bpy.ops.wm.read_factory_settings(use_empty=True)
    addon_utils.enable(ADDON_MODULE, default_set=True)
    bpy.context.preferences.addons[ADDON_MODULE].preferences.python_path = sys.executable
    return bpy.context.scene


def _import_mesh(name: str):
    import bpy

    bpy.ops.wm.obj_import(filepath=str(MESHES / f"{name}.obj"), forward_axis="Y", up_axis="Z")
    obj = bpy.context.selected_objects[0]
    bpy.context.view_layer.objects.active = obj
    return obj


@pytest.fixture
def import_mesh(scene):
    """Import ``assets/meshes/<name>.obj`` (Z up, as written) as the active, selected object of a fresh scene."""
    return _import_mesh
