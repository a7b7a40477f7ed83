"""Builds the `minimal` extension: nvcc compiles add_kernel.cu to an object, setuptools compiles
minimal.c and links both with the static CUDA runtime.   python3 setup.py build_ext --inplace"""
import os
import shutil
import subprocess

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

CUDA = os.environ.get("CUDA_HOME", "/usr/local/cuda")


class BuildWithNvcc(build_ext):
    def build_extension(self, ext):
        os.makedirs(self.build_temp, exist_ok=True)
        obj = os.path.join(self.build_temp, "add_kernel.o")
        subprocess.run([shutil.which("nvcc") or os.path.join(CUDA, "bin", "nvcc"), "-c", "add_kernel.cu", "-o", obj,
                        "-O3", "-Xcompiler", "-fPIC", "-arch=sm_90"], check=True)
        ext.extra_objects = [obj]
        super().build_extension(ext)


setup(name="minimal", ext_modules=[Extension("minimal", ["minimal.c"], include_dirs=[os.path.join(CUDA, "include")],
                                             library_dirs=[os.path.join(CUDA, "lib64")],
                                             libraries=["cudart_static", "stdc++", "rt", "pthread", "dl"])],
      cmdclass={"build_ext": BuildWithNvcc})
