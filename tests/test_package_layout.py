"""The package holds HDET: demo material and test plumbing stay off the path that ``import hdet_hf`` loads."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# Loaded on demand only: the demo task and metrics, test/benchmark plumbing, and the deprecated old name.
NOT_CORE = ("hdet_hf.examples", "hdet_hf.testing", "hdet_hf.data")


def _modules_after(statement: str) -> list[str]:
    """The ``hdet_hf`` modules in ``sys.modules`` after running ``statement`` in a fresh interpreter."""
    code = f"{statement}\nimport json, sys\nprint(json.dumps(sorted(m for m in sys.modules if m.startswith('hdet_hf'))))"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_import_hdet_hf_loads_no_demo_or_test_modules():
    loaded = _modules_after("import hdet_hf; hdet_hf.HDETTrainer")
    assert "hdet_hf.trainer" in loaded  # the check sees the package's own imports
    assert [m for m in loaded if m.startswith(NOT_CORE)] == []


def test_public_names_load_on_first_use_and_the_engine_alone_skips_the_trainer():
    # `transformers.Trainer` costs ~5 s of CPU per process; the engine, config and scheduler do not need it.
    code = "import hdet_hf, hdet_hf.engine; import sys; print('transformers.trainer' in sys.modules)"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split() == ["False"]
    import hdet_hf

    for name in hdet_hf.__all__:
        value = getattr(hdet_hf, name)
        assert value.__name__ == name and value.__module__.startswith("hdet_hf."), name
    assert set(hdet_hf.__all__) <= set(dir(hdet_hf))
    assert hdet_hf.hsdp.__name__ == "hdet_hf.hsdp"  # submodules still resolve as attributes
    with pytest.raises(AttributeError, match="no attribute 'not_a_name'"):
        hdet_hf.not_a_name  # noqa: B018


def test_the_launcher_loads_no_demo_or_test_modules():
    # `-m hdet_hf.launch` is the other entry point users run; it must not pull the demo in either.
    loaded = _modules_after("import hdet_hf.launch")
    assert [m for m in loaded if m.startswith(NOT_CORE)] == []


def test_old_data_module_still_imports_with_a_deprecation_warning():
    sys.modules.pop("hdet_hf.data", None)
    with pytest.warns(FutureWarning, match=r"hdet_hf\.examples\.data"):
        import hdet_hf.data as old
    from hdet_hf.examples import data as new

    for name in new.__all__:
        assert getattr(old, name) is getattr(new, name), name


def test_package_data_lists_the_moved_demo_files():
    """pyproject's package-data must name the demo files where they now live, or a wheel ships without them."""
    tomllib = pytest.importorskip("tomllib")
    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"][
        "hdet_hf"
    ]
    shipped = {path for pattern in patterns for path in (ROOT / "hdet_hf").glob(pattern)}
    from hdet_hf.examples.data import DEFAULT_MODEL_CONFIG_PATH
    from hdet_hf.examples.metrics import AVAILABLE_METRICS, metric_path

    assert DEFAULT_MODEL_CONFIG_PATH in shipped
    for name in AVAILABLE_METRICS:
        assert metric_path(name) / f"{name}.py" in shipped
