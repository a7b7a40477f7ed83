"""Builds lab's extension module lab.lab: C binding files with the C compiler, .cu kernels with nvcc.

The extension is an ordinary setuptools Extension; a build_ext subclass (after CuPy's
install/cupy_builder) compiles each .cu file to an object with nvcc first and hands those objects to
the normal link. The CUDA runtime is linked statically, so the module imports without a driver.

Environment:
  LAB_CUDA_ARCH  architectures, ';'-separated: "80;90" (default) builds SASS for sm_80 and sm_90
                 plus PTX for the newest, so newer GPUs can JIT it. "90" alone builds faster. Units
                 named *_wgmma.cu (Hopper's wgmma kernels) are built for sm_90a alone where the list
                 has 90 (unit_gencode).
  CUDA_HOME      the CUDA toolkit (default: the directory above the nvcc on PATH, else /usr/local/cuda).
  LAB_NVCC_JOBS  how many nvcc processes to run at once (default: CPU count).
  LAB_NVCC_DEBUG kernel units to build with device debug information (-G, for cuda-gdb), by file name:
                 "rowwise_cross_entropy.cu" or several, comma-separated; the others stay optimized.
  LAB_DEBUG      1: build the C files with their assertions on (the binding asserts, for one, that no
                 argument reader runs with an exception already set).
  LAB_NVCC_CACHE a folder of nvcc objects kept by content (nvcc's version, the flags, the text of the
                 unit and of every file in src/kernels/): a build with the same sources and flags -
                 another checkout, the wheel pip builds from the sdist - copies them instead of
                 compiling again. `make test` and `make package-check` share one.
"""
import hashlib
import os
import re
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import setuptools

# pyproject.toml's license metadata (PEP 639: an SPDX string and license-files) needs setuptools 77;
# older ones reject it with a page of schema errors. Say it in one line, before they do.
if int(setuptools.__version__.split(".")[0]) < 77:
    sys.exit(f"lab's build needs setuptools >= 77 (this Python has {setuptools.__version__}): run "
             f"`{os.path.basename(sys.executable)} -m pip install 'setuptools>=77,<85'`, or build with "
             "`pip install .`, which fetches a matching setuptools by itself")

from setuptools import Extension, setup  # noqa: E402
from setuptools.command.build_ext import build_ext  # noqa: E402

ROOT = os.path.dirname(os.path.abspath(__file__))
VERSION = re.search(r'__version__ = "([^"]+)"', open(os.path.join(ROOT, "lab", "_version.py")).read()).group(1)


def find_cuda_home():
    """(toolkit directory, nvcc path). A toolkit directory is one whose include/ has the runtime headers."""
    def is_toolkit(path):
        return os.path.exists(os.path.join(path, "include", "cuda_runtime_api.h"))

    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    if home:
        if not (is_toolkit(home) and os.path.exists(os.path.join(home, "bin", "nvcc"))):
            sys.exit(f"lab: CUDA_HOME={home} has no bin/nvcc and include/cuda_runtime_api.h; "
                     "point CUDA_HOME at a CUDA toolkit")
        return home, os.path.join(home, "bin", "nvcc")
    nvcc = shutil.which("nvcc")
    # nvcc on PATH may be a wrapper script outside the toolkit, so fall back to the usual place
    candidates = [os.path.dirname(os.path.dirname(os.path.realpath(nvcc)))] if nvcc else []
    candidates.append("/usr/local/cuda")
    for home in candidates:
        if is_toolkit(home) and os.path.exists(os.path.join(home, "bin", "nvcc")):
            return home, nvcc or os.path.join(home, "bin", "nvcc")
    sys.exit("lab: the CUDA toolkit was not found (no nvcc on PATH, no /usr/local/cuda). Install the CUDA "
             "toolkit (12.x or 13.x) and put nvcc on PATH, or set CUDA_HOME to the toolkit's directory.")


def arch_flags():
    archs = [a.strip() for a in os.environ.get("LAB_CUDA_ARCH", "80;90").replace(",", ";").split(";") if a.strip()]
    if not archs or not all(a.isdigit() for a in archs):
        sys.exit(f"lab: LAB_CUDA_ARCH must list compute capabilities like '80;90', got {os.environ['LAB_CUDA_ARCH']!r}")
    archs = sorted(set(archs), key=int)
    flags = [f"-gencode=arch=compute_{a},code=sm_{a}" for a in archs]
    flags.append(f"-gencode=arch=compute_{archs[-1]},code=compute_{archs[-1]}")  # PTX for newer GPUs
    listing = " ".join([f"sm_{a}" for a in archs] + [f"compute_{archs[-1]}"])
    return flags, listing


def unit_gencode(source, gencode):
    """The architecture flags for one unit. Units named *_wgmma.cu hold Hopper's wgmma kernels, which
    exist only for the sm_90a target (code for exactly compute capability 9.0): where the build includes
    sm_90 they are built for sm_90a alone and told so (LAB_WGMMA_BUILT); elsewhere they build like any
    unit, and their launchers decline."""
    if not source.endswith("_wgmma.cu") or "-gencode=arch=compute_90,code=sm_90" not in gencode:
        return gencode
    return ["-gencode=arch=compute_90a,code=sm_90a", "-DLAB_WGMMA_BUILT"]


def object_depends(source, obj):
    """The files an nvcc object was built from: what nvcc -MD wrote beside it (the source and every
    header it included, CUDA's own too), or - before the first build - every header beside the source."""
    try:
        text = open(obj + ".d").read().replace("\\\n", " ")
    except OSError:
        folder = os.path.dirname(source)
        return [source] + [os.path.join(folder, f) for f in os.listdir(folder) if f.endswith((".cuh", ".h", ".def"))]
    return [path for path in text.split(":", 1)[1].split() if os.path.exists(path)] + [source]


class ObjectCache:
    """nvcc objects by what they were built from (see LAB_NVCC_CACHE). Every file in src/kernels/ goes
    into each key - the units include only headers from there - so a header edited anywhere compiles
    every unit again: coarse, and never stale."""

    def __init__(self, folder, nvcc):
        self.folder = folder
        os.makedirs(folder, exist_ok=True)
        digest = hashlib.sha256(subprocess.run([nvcc, "--version"], capture_output=True, text=True, check=True).stdout
                                .encode())
        kernels = os.path.join(ROOT, "src", "kernels")
        for name in sorted(os.listdir(kernels)):
            digest.update(name.encode() + b"\0" + open(os.path.join(kernels, name), "rb").read())
        self.base = digest

    def path(self, source, flags):
        digest = self.base.copy()
        digest.update(source.encode() + b"\0" + " ".join(flags).encode())
        return os.path.join(self.folder, digest.hexdigest() + ".o")

    def fetch(self, cached, obj):
        """The object and nvcc's list of what it was built from (its .d): without the list, the next build
        would take every header beside the source as a dependency and recompile every unit for any edit."""
        if not os.path.exists(cached):
            return False
        if os.path.exists(cached + ".d"):
            shutil.copyfile(cached + ".d", obj + ".d")
        elif os.path.exists(obj + ".d"):
            os.remove(obj + ".d")  # an older entry without its list: the fallback, never a stale list
        shutil.copyfile(cached, obj)
        return True

    def keep(self, obj, cached):
        # the list first, so that an object in the cache always has its list beside it
        for made, entry in ((obj + ".d", cached + ".d"), (obj, cached)):
            partial = f"{entry}.{os.getpid()}.partial"  # another build may be writing the same entry
            shutil.copyfile(made, partial)
            os.replace(partial, entry)


class BuildExtWithNvcc(build_ext):
    """Compiles the .cu sources with nvcc (in parallel), then lets setuptools build and link the rest."""

    def build_extension(self, ext):
        cuda_sources = [s for s in ext.sources if s.endswith(".cu")]
        ext.sources = [s for s in ext.sources if not s.endswith(".cu")]
        cuda_home, nvcc = find_cuda_home()
        gencode, listing = arch_flags()
        ext.include_dirs.append(os.path.join(cuda_home, "include"))
        ext.library_dirs.append(os.path.join(cuda_home, "lib64"))
        objects_dir = os.path.join(self.build_temp, "cuda")
        os.makedirs(objects_dir, exist_ok=True)

        counter = iter(range(1, len(cuda_sources) + 1))
        cache = ObjectCache(os.environ["LAB_NVCC_CACHE"], nvcc) if os.environ.get("LAB_NVCC_CACHE") else None

        debug_units = {u.strip() for u in os.environ.get("LAB_NVCC_DEBUG", "").split(",") if u.strip()}

        def compile_one(source):
            debug = os.path.basename(source) in debug_units
            # the architectures (and -G) are part of the name, so changing LAB_CUDA_ARCH or LAB_NVCC_DEBUG
            # never reuses a stale object
            obj = os.path.join(objects_dir, f"{os.path.basename(source)}.{listing.replace(' ', '-')}"
                                            f"{'.sm_90a' if '-DLAB_WGMMA_BUILT' in unit_gencode(source, gencode) else ''}"
                                            f"{'.debug' if debug else ''}.o")
            if not self.force and os.path.exists(obj) and all(os.path.getmtime(obj) >= os.path.getmtime(d)
                                                               for d in object_depends(source, obj)):
                return obj
            flags = ["-O3", "-std=c++17", "-Isrc", "-Xcompiler", "-fPIC", "-Xcompiler", "-fvisibility=hidden",
                     f'-DLAB_ARCH_LIST="{listing}"', *unit_gencode(source, gencode)] + (["-G"] if debug else [])
            cached = cache.path(source, flags) if cache else None
            if cached and cache.fetch(cached, obj):
                print(f"lab: nvcc [{next(counter)}/{len(cuda_sources)}] {source} for {listing}: from "
                      f"LAB_NVCC_CACHE", flush=True)
                return obj
            command = [nvcc, "-c", source, "-o", obj, "-MD", "-MF", obj + ".d", *flags]
            print(f"lab: nvcc [{next(counter)}/{len(cuda_sources)}] {source} for {listing}", flush=True)
            print(" ".join(command), flush=True)
            started = time.monotonic()
            subprocess.run(command, check=True)
            print(f"lab: nvcc {source} took {time.monotonic() - started:.0f} s", flush=True)
            if cached:
                cache.keep(obj, cached)
            return obj

        # The headers a user kernel may #include (lab.compile puts this folder on NVRTC's path).
        include_dir = os.path.join(os.path.dirname(self.get_ext_fullpath(ext.name)), "include")
        os.makedirs(include_dir, exist_ok=True)
        for header in USER_HEADERS:
            shutil.copy2(os.path.join(ROOT, "src", "kernels", header), include_dir)

        jobs = int(os.environ.get("LAB_NVCC_JOBS", os.cpu_count() or 1))
        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            ext.extra_objects = list(pool.map(compile_one, cuda_sources)) + ext.extra_objects
        super().build_extension(ext)


def files_under(folder, endings):
    """Paths (relative to the repository) of the files in src/<folder> whose names end in `endings`."""
    return sorted(os.path.join("src", folder, f) for f in os.listdir(os.path.join(ROOT, "src", folder))
                  if f.endswith(endings))


# Kernel headers user kernels compiled by lab.compile may include: no host headers, NVRTC-clean
# (tests/test_source_layout.py compiles them with NVRTC). Shipped in the package as lab/include/.
USER_HEADERS = ["functors.cuh", "dtype_traits.cuh", "strided_layout.h", "indexing.cuh", "elementwise_kernel.cuh"]

# The four levels of docs/design.md, one folder each (kernels/ holds the .cu files nvcc compiles).
LEVEL_FOLDERS = ["binding", "dispatch", "kernels", "testing"]
sources = [path for folder in LEVEL_FOLDERS for path in files_under(folder, (".c", ".cu"))]
# Every header, table and kernel source: setuptools relinks lab.so only when one of these (or a C
# source) is newer than it, and the nvcc objects reach the link as extra_objects, which it does not
# watch. Listing the .cu/.cuh files here is what makes an edited kernel reach the module.
depends = [path for folder in LEVEL_FOLDERS for path in files_under(folder, (".h", ".def", ".cuh", ".cu"))]

extension = Extension(
    "lab.lab",
    sources=sources,
    include_dirs=["src"],
    define_macros=[("LAB_VERSION", f'"{VERSION}"')],
    libraries=["cudart_static", "stdc++", "rt", "pthread", "dl"],
    # LAB_DEBUG=1: the C files keep their assertions (Python's flags define NDEBUG), among them the
    # binding's check that no argument reader is entered with an exception already set
    extra_compile_args=["-std=c11", "-O2", "-Wall", "-Wextra", "-Wno-unused-parameter", "-fvisibility=hidden"]
    + (["-UNDEBUG"] if os.environ.get("LAB_DEBUG") == "1" else []),
    extra_link_args=["-Wl,--exclude-libs,ALL"],  # keep the static runtime's symbols private to lab
    depends=depends,
)

setup(version=VERSION, ext_modules=[extension], cmdclass={"build_ext": BuildExtWithNvcc})
