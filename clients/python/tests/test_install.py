"""`pip install ./clients/python` in a fresh virtualenv with no index (no network), then import it."""

from __future__ import annotations

import subprocess
import sys
import venv
from pathlib import Path

from conftest import PY_ROOT


def run(*cmd: str, cwd: Path) -> str:
    result = subprocess.run(list(cmd), cwd=str(cwd), capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, f"{cmd}\n{result.stdout[-2000:]}\n{result.stderr[-2000:]}"
    return result.stdout


def test_offline_install_in_a_fresh_venv(tmp_path: Path):
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True, clear=True).create(env_dir)
    python = env_dir / ("Scripts/python.exe" if sys.platform == "win32" else "bin/python")
    # --no-index: pip may not contact any index; the in-tree build backend needs nothing from one.
    run(str(python), "-m", "pip", "install", "--no-index", "--disable-pip-version-check", "--no-cache-dir",
        str(PY_ROOT), cwd=tmp_path)
    out = run(str(python), "-c",
              "import debate_reward, debate_reward.trl, debate_reward.verl, asyncio;"
              "print(debate_reward.__version__, debate_reward.__file__);"
              "print(asyncio.iscoroutinefunction(debate_reward.verl.compute_score))",
              cwd=tmp_path)
    version, location = out.splitlines()[0].split(" ", 1)
    assert version and "site-packages" in location  # the installed copy, not the source tree
    assert out.splitlines()[1] == "True"
    shown = run(str(python), "-m", "pip", "show", "debate-reward", cwd=tmp_path)
    requires = next(line for line in shown.splitlines() if line.startswith("Requires:"))
    assert requires.split(":", 1)[1].strip() == ""  # no runtime dependencies
    # The source tree stays clean (no build/ or *.egg-info left behind).
    assert not (PY_ROOT / "build").exists() and not list(PY_ROOT.glob("**/*.egg-info"))
