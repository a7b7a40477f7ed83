"""Builds the `minimal` extension: nvcc compiles add_kernel.cu to an object, setuptools compiles
minimal.c and links both with the static CUDA runtime.
    python3 examples/minimal_extension/setup.py build_ext --inplace      (from anywhere)
LAB_CUDA_ARCH picks the GPU architectures as for lab itself ("80;90" by default)."""
import os
import shutil
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))
os.chdir(HERE)  # the sources are named relative to this folder, wherever the build was started

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

CUDA = os.environ.get("CUDA_HOME", "/usr/local/cuda")


class BuildWithNvcc(build_ext):
    def build_extension(self, ext):
        os.makedirs(self.build_temp, exist_ok=True)
        obj = os.path.join(self.build_temp, "add_kernel.o")
        archs = [a for a in os.environ.get("LAB_CUDA_ARCH", "80;90").replace(",", ";").split(";") if a.strip()]
        gencode = [f"-gencode=arch=compute_{a},code=sm_{a}" for a in archs]
        gencode.append(f"-gencode=arch=compute_{archs[-1]},code=compute_{archs[-1]}")  # PTX for newer GPUs
        subprocess.run([shutil.which("nvcc") or os.path.join(CUDA, "bin", "nvcc"), "-c", "add_kernel.cu", "-o", obj,
                        "-O3", "-Xcompiler", "-fPIC", *gencode], check=True)
        ext.extra_objects = [obj]
        super().build_extension(ext)


setup(name="minimal", ext_modules=[Extension("minimal", ["minimal.c"], include_dirs=[os.path.join(CUDA, "include")],
                                             library_dirs=[os.path.join(CUDA, "lib64")],
                                             libraries=["cudart_static", "stdc++", "rt", "pthread", "dl"])],
      cmdclass={"build_ext": BuildWithNvcc})
