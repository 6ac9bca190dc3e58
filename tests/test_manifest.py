"""The extension manifest and package: Blender's own validation and build, plus the fields the issues require."""

import re
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MANIFEST = tomllib.loads((ROOT / "blender_manifest.toml").read_text(encoding="utf-8"))


def test_blender_validates_the_manifest(blender_ext):
    proc = blender_ext("validate", str(ROOT))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Success" in proc.stdout


def test_manifest_fields():
    assert MANIFEST["schema_version"] == "1.0.0"
    assert MANIFEST["id"] == "neurok"
    assert MANIFEST["type"] == "add-on"
    assert MANIFEST["license"] == ["SPDX:GPL-3.0-or-later"]
    assert MANIFEST["blender_version_min"] == "4.2.0"
    assert re.fullmatch(r"\d+\.\d+\.\d+", MANIFEST["version"])
    assert MANIFEST["tagline"] and not MANIFEST["tagline"].endswith((".", "!", "?"))
    assert MANIFEST["maintainer"]


def test_permissions_have_reasons():
    permissions = MANIFEST["permissions"]
    assert set(permissions) == {"files", "network"}  # the worker and caches; the runtime download
    for reason in permissions.values():
        assert isinstance(reason, str) and 0 < len(reason) <= 64 and not reason.endswith(".")


def test_built_zip_contents(extension_zip):
    names = zipfile.ZipFile(extension_zip).namelist()
    tops = {n.split("/")[0] for n in names}
    assert {"blender_manifest.toml", "__init__.py", "neurok_addon", "model_runtime", "assets"} <= tops
    assert "neurok_addon/runtime-requirements.txt" in names
    assert "model_runtime/worker.py" in names and "model_runtime/protocol.py" in names
    assert not tops & {"tests", ".ci", "data", ".git", ".venv", "scripts", "runs", "out"}
    assert not any("__pycache__" in n for n in names)
    assert not [n for n in names if n.startswith("model_runtime/lab/")]  # the lab stays out of the artist's zip
    assert "model_runtime/__main__.py" not in names  # its command line is the lab's
    assert not [n for n in names if n.endswith(".safetensors")]  # the add-on's motion needs no learned weights


def test_every_shipped_module_imports_from_the_zip(extension_zip, tmp_path):
    """Nothing the zip carries imports the lab it leaves out: each model_runtime module imports from the unpacked
    zip alone (an editable install can still reach the checkout's lab, so no module may come from elsewhere)."""
    zipfile.ZipFile(extension_zip).extractall(tmp_path)
    modules = sorted(str(p.relative_to(tmp_path).with_suffix("")).replace("/", ".").removesuffix(".__init__")
                     for p in (tmp_path / "model_runtime").rglob("*.py"))
    code = ("import importlib, sys\n"
            "for name in sys.argv[1:]:\n"
            "    importlib.import_module(name)\n"
            "strays = [n for n, m in sys.modules.items() if n.startswith('model_runtime')\n"
            "          and not (getattr(m, '__file__', None) or '').startswith(sys.path[0])]\n"
            "assert not strays, strays\n")
    proc = subprocess.run([sys.executable, "-I", "-c", f"import sys; sys.path.insert(0, {str(tmp_path)!r})\n" + code,
                           *modules], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr


def test_runtime_requirements_match_pyproject():
    """The "Set up runtime" button installs exactly the runtime's declared dependencies."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    lines = (ROOT / "neurok_addon" / "runtime-requirements.txt").read_text(encoding="utf-8").splitlines()
    requirements = [line.strip() for line in lines if line.strip() and not line.startswith("#")]
    assert requirements == pyproject["project"]["dependencies"]
