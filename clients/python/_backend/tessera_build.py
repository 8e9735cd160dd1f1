"""A PEP 517 build backend for tessera_client, standard library only.

Why not setuptools: pip builds a pyproject.toml project in an isolated
environment and installs the backend named in `requires` there, from an
index. Offline (no PyPI here, nor on many clusters) that fails unless the
user knows to pass --no-build-isolation. A backend in the source tree with
no requirements needs no download at all, so `pip install ./clients/python`
works as written on any pip that knows `backend-path` (pip 20 and later).

The package is pure Python with no dependencies, so a wheel is only a zip of
its modules plus the dist-info files the wheel format (PEP 427, PEP 491)
asks for: METADATA, WHEEL and RECORD. It also builds an sdist and an
editable wheel (PEP 660: a .pth file naming this directory), so that
`pip install -e` and `pip wheel` work too.
"""
import base64
import hashlib
import io
import os
import re
import tarfile
import time
import zipfile

NAME = "tessera-client"          # the distribution's name
PACKAGE = "tessera_client"       # the import package
HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _version():
    # One place says the version: the package itself.
    with open(os.path.join(HERE, PACKAGE, "__init__.py"), encoding="utf-8") as f:
        m = re.search(r'^__version__ = "([^"]+)"', f.read(), re.M)
    if not m:
        raise RuntimeError("no __version__ line in %s/__init__.py" % PACKAGE)
    return m.group(1)


def _dist():
    return "%s-%s" % (PACKAGE, _version())   # wheel names use underscores


def _metadata():
    readme = ""
    path = os.path.join(HERE, "README.md")
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            readme = f.read()
    lines = [
        "Metadata-Version: 2.1",
        "Name: " + NAME,
        "Version: " + _version(),
        "Summary: Python client for the Tessera GPU cluster platform's API",
        "Requires-Python: >=3.8",
        "Description-Content-Type: text/markdown",
    ]
    return ("\n".join(lines) + "\n\n" + readme).encode("utf-8")


def _wheel_file():
    return (
        "Wheel-Version: 1.0\n"
        "Generator: tessera_build\n"
        "Root-Is-Purelib: true\n"
        "Tag: py3-none-any\n"
    ).encode("utf-8")


def _package_files():
    """(archive name, bytes) of every module of the package, sorted."""
    out = []
    root = os.path.join(HERE, PACKAGE)
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for fn in sorted(filenames):
            if not fn.endswith(".py"):
                continue
            full = os.path.join(dirpath, fn)
            rel = os.path.relpath(full, HERE).replace(os.sep, "/")
            with open(full, "rb") as f:
                out.append((rel, f.read()))
    return out


def _record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d" % (name, digest, len(data))


def _write_wheel(wheel_directory, files):
    """Writes a wheel of FILES ((name, bytes)) plus the dist-info; returns its name."""
    dist = _dist()
    info = dist + ".dist-info"
    files = list(files) + [
        (info + "/METADATA", _metadata()),
        (info + "/WHEEL", _wheel_file()),
    ]
    record = "\n".join([_record_line(n, d) for n, d in files] + [info + "/RECORD,,"]) + "\n"
    files.append((info + "/RECORD", record.encode("utf-8")))
    basename = dist + "-py3-none-any.whl"
    # A fixed time stamp: the same sources give the same wheel.
    stamp = (2020, 1, 1, 0, 0, 0)
    with zipfile.ZipFile(os.path.join(wheel_directory, basename), "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in files:
            zi = zipfile.ZipInfo(name, stamp)
            zi.external_attr = 0o644 << 16
            zi.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(zi, data)
    return basename


# ---- PEP 517 hooks -------------------------------------------------------

def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    return _write_wheel(wheel_directory, _package_files())


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    # A .pth line puts this directory on sys.path: edits to the sources
    # take effect without reinstalling.
    pth = (HERE + "\n").encode("utf-8")
    return _write_wheel(wheel_directory, [("%s.pth" % PACKAGE, pth)])


def build_sdist(sdist_directory, config_settings=None):
    dist = "%s-%s" % (PACKAGE, _version())
    basename = dist + ".tar.gz"
    names = ["pyproject.toml", "README.md", "_backend/tessera_build.py"]
    names += [n for n, _ in _package_files()]
    for dirpath, dirnames, filenames in os.walk(os.path.join(HERE, "tests")):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        names += sorted(os.path.relpath(os.path.join(dirpath, f), HERE).replace(os.sep, "/")
                        for f in filenames if f.endswith(".py"))
    with tarfile.open(os.path.join(sdist_directory, basename), "w:gz", format=tarfile.PAX_FORMAT) as t:
        def add(name, data):
            ti = tarfile.TarInfo(dist + "/" + name)
            ti.size = len(data)
            ti.mode = 0o644
            ti.mtime = int(time.time())
            t.addfile(ti, io.BytesIO(data))
        for n in names:
            path = os.path.join(HERE, n)
            if os.path.exists(path):
                with open(path, "rb") as f:
                    add(n, f.read())
        add("PKG-INFO", _metadata())
    return basename
