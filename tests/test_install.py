"""The project installs like a library (issue 20 item 7): built non-editable into a fresh venv, `predictor` runs
from an empty directory with a shipped profile named by its name, and `predictor validate --published cnn` reads
its corpus from the package data. Slow: a build and a published validation, ~35 s on the 2-core VM."""
from __future__ import annotations

import json
import os
import shutil
import site
import subprocess
import sysconfig
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("kernels", "profiler", "calibrate", "predictor", "paraoracle")
#: pip's words for "needs something it may not fetch": the test is skipped then, any other failure fails it
OFFLINE = ("No matching distribution", "Could not find a version", "BackendUnavailable", "No module named",
           "Cannot import 'setuptools", "Connection", "NewConnectionError")


def _run(argv, cwd, env, timeout=300) -> subprocess.CompletedProcess:
    return subprocess.run([str(a) for a in argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.mark.slow
def test_a_non_editable_install_predicts_from_another_directory(tmp_path):
    # build from a copy: building in the checkout would write build/ and *.egg-info into it
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    for package in PACKAGES:
        shutil.copytree(ROOT / package, src / package, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))

    # a venv whose dependencies (torch, numpy, ...) are this interpreter's, through a .pth file: its lines add
    # folders without running their own .pth files, so an editable install of the checkout there stays out
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=False)
    python = env_dir / "bin" / "python"
    own_site = _run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], tmp_path,
                    None).stdout.strip()
    deps = list(dict.fromkeys(site.getsitepackages() + [sysconfig.get_paths()["purelib"]]
                              + ([site.getusersitepackages()] if site.ENABLE_USER_SITE else [])))
    (Path(own_site) / "_paraoracle_test_deps.pth").write_text("\n".join(deps) + "\n")

    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env.update(PATH=f"{env_dir / 'bin'}{os.pathsep}{env.get('PATH', '')}", PARAORACLE_CACHE=str(tmp_path / "cache"),
               PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    # --ignore-installed: a paraoracle already installed where the dependencies are is neither used nor removed
    pip = _run([python, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "--ignore-installed",
                "--no-cache-dir", "-q", src], tmp_path, env)
    if pip.returncode != 0:
        output = (pip.stdout + pip.stderr).strip()
        if any(word in output for word in OFFLINE):
            pytest.skip(f"pip cannot build the project offline here: {output.splitlines()[-1][:200]}")
        pytest.fail(f"pip install failed:\n{output[-3000:]}")

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    where = _run([python, "-c", "import predictor, calibrate.shipped as s; print(predictor.__file__); "
                  "print(s.shipped_profiles_dir())"], elsewhere, env)
    assert where.returncode == 0, where.stderr
    module, profiles = where.stdout.split()
    assert module.startswith(own_site) and profiles.startswith(own_site), where.stdout  # the install, not the checkout

    run = _run(["predictor", "run", "--model", "resnet50", "--batch", "256", "--gpus", "8", "--strategy", "data",
                "--profile", "v100-dgx1-8gpu.published"], elsewhere, env)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "recommended: data" in run.stdout and "s/iteration" in run.stdout

    unknown = _run(["predictor", "run", "--model", "resnet50", "--batch", "256", "--gpus", "8",
                    "--profile", "v100-nowhere"], elsewhere, env)
    assert unknown.returncode == 2 and "v100-dgx1-8gpu.published" in unknown.stderr
    assert len(unknown.stderr.strip().splitlines()) == 1

    published = _run(["predictor", "validate", "--published", "cnn", "--json"], elsewhere, env)
    assert published.returncode == 0, published.stderr[-3000:]
    assert json.loads(published.stdout)["rows_validated"] >= 250
    assert not list(elsewhere.iterdir()), "the installed commands wrote into the working directory"
