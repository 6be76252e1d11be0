"""A stdlib-only PEP 517 / PEP 660 build backend for the debate-reward client.

Why not setuptools: pip builds in an isolated environment and would download the build backend from an
index, so `pip install ./clients/python` would fail on a machine with no network (and Python >= 3.12
virtualenvs no longer ship setuptools at all). The package is pure Python with no dependencies, so a
wheel is just a zip of `src/debate_reward` plus three metadata files; this module writes exactly that.
"""

from __future__ import annotations

import base64
import hashlib
import io
import os
import re
import tarfile
import time
import zipfile
from pathlib import Path

NAME = "debate-reward"
PACKAGE = "debate_reward"
SUMMARY = "Stdlib-only client and trainer adapters (TRL, verl) for the debate-reward HTTP reward server"
REQUIRES_PYTHON = ">=3.9"
CLASSIFIERS = (
    "Programming Language :: Python :: 3",
    "Operating System :: OS Independent",
    "Typing :: Typed",
)

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src" / PACKAGE
# Wheels, sdists and dist-info directories use the normalised name (PEP 427 / PEP 625).
DIST = re.sub(r"[-_.]+", "_", NAME).lower()
# A zip entry needs a timestamp >= 1980; SOURCE_DATE_EPOCH makes builds reproducible.
EPOCH = max(int(os.environ.get("SOURCE_DATE_EPOCH", "315532800")), 315532800)


def _version() -> str:
    text = (SRC / "__init__.py").read_text(encoding="utf-8")
    match = re.search(r'^__version__\s*=\s*"([^"]+)"', text, re.MULTILINE)
    if match is None:
        raise RuntimeError(f"no __version__ in {SRC / '__init__.py'}")
    return match.group(1)


def _metadata() -> str:
    lines = [
        "Metadata-Version: 2.1",
        f"Name: {NAME}",
        f"Version: {_version()}",
        f"Summary: {SUMMARY}",
        f"Requires-Python: {REQUIRES_PYTHON}",
        *(f"Classifier: {c}" for c in CLASSIFIERS),
        "Description-Content-Type: text/markdown",
        "",
    ]
    readme = ROOT / "README.md"
    body = readme.read_text(encoding="utf-8") if readme.exists() else ""
    return "\n".join(lines) + "\n" + body


def _wheel_file(tag: str) -> str:
    return f"Wheel-Version: 1.0\nGenerator: {PACKAGE}_build\nRoot-Is-Purelib: true\nTag: {tag}\n"


def _package_files() -> list[Path]:
    return sorted(
        p
        for p in SRC.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.suffix not in (".pyc", ".pyo")
    )


class _WheelWriter:
    def __init__(self, path: Path) -> None:
        self._zip = zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED)
        self._records: list[str] = []

    def add(self, arcname: str, data: bytes) -> None:
        info = zipfile.ZipInfo(arcname, date_time=time.gmtime(EPOCH)[:6])
        info.external_attr = 0o644 << 16
        info.compress_type = zipfile.ZIP_DEFLATED
        self._zip.writestr(info, data)
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode("ascii")
        self._records.append(f"{arcname},sha256={digest},{len(data)}")

    def close(self, dist_info: str) -> None:
        record = f"{dist_info}/RECORD"
        lines = [*self._records, f"{record},,"]
        info = zipfile.ZipInfo(record, date_time=time.gmtime(EPOCH)[:6])
        info.external_attr = 0o644 << 16
        self._zip.writestr(info, "\n".join(lines) + "\n")
        self._zip.close()


def _write_dist_info(target: Path) -> str:
    dist_info = f"{DIST}-{_version()}.dist-info"
    (target / dist_info).mkdir(parents=True, exist_ok=True)
    (target / dist_info / "METADATA").write_text(_metadata(), encoding="utf-8")
    (target / dist_info / "WHEEL").write_text(_wheel_file("py3-none-any"), encoding="utf-8")
    return dist_info


def _build(wheel_directory: str, editable: bool) -> str:
    version = _version()
    name = f"{DIST}-{version}-py3-none-any.whl"
    dist_info = f"{DIST}-{version}.dist-info"
    out = Path(wheel_directory)
    out.mkdir(parents=True, exist_ok=True)
    writer = _WheelWriter(out / name)
    if editable:
        # PEP 660 the simple way: a .pth file that puts src/ on sys.path.
        writer.add(f"__editable__.{DIST}-{version}.pth", (str(SRC.parent) + "\n").encode("utf-8"))
    else:
        for path in _package_files():
            writer.add(path.relative_to(SRC.parent).as_posix(), path.read_bytes())
    writer.add(f"{dist_info}/METADATA", _metadata().encode("utf-8"))
    writer.add(f"{dist_info}/WHEEL", _wheel_file("py3-none-any").encode("utf-8"))
    writer.close(dist_info)
    return name


# --- PEP 517 hooks -------------------------------------------------------------------------------------


def get_requires_for_build_wheel(config_settings: object = None) -> list[str]:
    return []


def get_requires_for_build_sdist(config_settings: object = None) -> list[str]:
    return []


def get_requires_for_build_editable(config_settings: object = None) -> list[str]:
    return []


def prepare_metadata_for_build_wheel(metadata_directory: str, config_settings: object = None) -> str:
    return _write_dist_info(Path(metadata_directory))


def prepare_metadata_for_build_editable(metadata_directory: str, config_settings: object = None) -> str:
    return _write_dist_info(Path(metadata_directory))


def build_wheel(
    wheel_directory: str, config_settings: object = None, metadata_directory: object = None
) -> str:
    return _build(wheel_directory, editable=False)


def build_editable(
    wheel_directory: str, config_settings: object = None, metadata_directory: object = None
) -> str:
    return _build(wheel_directory, editable=True)


def build_sdist(sdist_directory: str, config_settings: object = None) -> str:
    version = _version()
    base = f"{DIST}-{version}"
    out = Path(sdist_directory)
    out.mkdir(parents=True, exist_ok=True)
    members = [ROOT / "pyproject.toml", ROOT / "README.md", Path(__file__).resolve(), *_package_files()]
    with tarfile.open(out / f"{base}.tar.gz", "w:gz", format=tarfile.PAX_FORMAT) as tar:
        for path in members:
            if path.exists():
                info = tar.gettarinfo(str(path), arcname=f"{base}/{path.relative_to(ROOT).as_posix()}")
                info.mtime, info.uid, info.gid, info.uname, info.gname = EPOCH, 0, 0, "", ""
                with path.open("rb") as fh:
                    tar.addfile(info, fh)
        pkg_info = _metadata().encode("utf-8")
        info = tarfile.TarInfo(f"{base}/PKG-INFO")
        info.size, info.mtime, info.mode = len(pkg_info), EPOCH, 0o644
        tar.addfile(info, io.BytesIO(pkg_info))
    return f"{base}.tar.gz"
