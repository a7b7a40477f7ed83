"""Builds the lessons: nvcc compiles lessons_kernels.cu once, setuptools compiles each lesson's C
file into its own extension and links it with that object and the static CUDA runtime.
    python3 examples/lessons/setup.py build_ext --inplace      (from anywhere)
LAB_CUDA_ARCH picks the GPU architectures as for lab itself ("80;90" by default)."""
import os
import shutil
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))
os.chdir(HERE)  # the sources are named relative to this folder, wherever the build was started

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

CUDA = os.environ.get("CUDA_HOME", "/usr/local/cuda")
LESSONS = ["lesson1_keywords", "lesson2_module_state", "lesson3_strides_dtypes", "lesson4_plan_launch",
           "lesson5_streams", "lesson6_dlpack_exchange", "lesson7_xla_ffi"]
SRC = os.path.join(os.path.dirname(os.path.dirname(HERE)), "src")  # lessons 6, 7 include lab's DLPack and XLA headers


class BuildWithNvcc(build_ext):
    def build_extensions(self):
        os.makedirs(self.build_temp, exist_ok=True)
        obj = os.path.join(self.build_temp, "lessons_kernels.o")
        archs = [a for a in os.environ.get("LAB_CUDA_ARCH", "80;90").replace(",", ";").split(";") if a.strip()]
        gencode = [f"-gencode=arch=compute_{a},code=sm_{a}" for a in archs]
        gencode.append(f"-gencode=arch=compute_{archs[-1]},code=compute_{archs[-1]}")  # PTX for newer GPUs
        subprocess.run([shutil.which("nvcc") or os.path.join(CUDA, "bin", "nvcc"), "-c", "lessons_kernels.cu", "-o",
                        obj, "-O3", "-Xcompiler", "-fPIC", *gencode], check=True)
        for ext in self.extensions:
            ext.extra_objects = [obj]
        super().build_extensions()


setup(name="lessons",
      ext_modules=[Extension(name, [f"{name}.c"], include_dirs=[os.path.join(CUDA, "include"), SRC],
                             library_dirs=[os.path.join(CUDA, "lib64")],
                             libraries=["cudart_static", "stdc++", "rt", "pthread", "dl"]) for name in LESSONS],
      cmdclass={"build_ext": BuildWithNvcc})
