"""Your own kernels on anyone's arrays: lab.RawModule and lab.RawKernel.

    kernel = lab.RawKernel(r'''
    extern "C" __global__ void scale(const float* x, float* y, float a, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) y[i] = a * x[i];
    }''', "scale", signature="const float*, float*, float, int")
    kernel(((n + 255) // 256,), (256,), (x, y, 2.0, n))     # x, y: torch, CuPy, Numba, JAX, lab.Array

The source compiles with NVRTC at the first call (lab.compile: cached in memory and on disk), for
the architecture of device 0; the cubin loads with the runtime's library calls and launches through
lab's op driver (src/binding/raw_kernel.c), so a user's kernel gets the stream policy of every lab op.
Without `signature`, each argument's own type decides its C type: arrays -> device pointers, NumPy
scalars -> their exact type, int -> long long, float -> double, bool -> bool; the kernel's
parameter sizes are read from the compiled binary (lab/_kernel_params.py), so a mismatch is a
TypeError before launch, never a wrong read.
"""
import re
import threading

from . import lab as _core
from ._kernel_params import parameter_sizes
from ._nvrtc import Program, check_program
from ._nvrtc import compile as _compile

# C parameter types -> the binding's letters (struct module's, plus 'E' for bfloat16, 'v' for void).
_SCALAR_TYPES = {
    "bool": "?", "char": "b", "signed char": "b", "int8_t": "b", "unsigned char": "B", "uint8_t": "B",
    "short": "h", "int16_t": "h", "unsigned short": "H", "uint16_t": "H", "int": "i", "int32_t": "i",
    "unsigned": "I", "unsigned int": "I", "uint32_t": "I", "long": "q", "long long": "q", "int64_t": "q",
    "ptrdiff_t": "q", "unsigned long": "Q", "unsigned long long": "Q", "uint64_t": "Q", "size_t": "Q",
    "float": "f", "double": "d", "__half": "e", "half": "e", "__nv_bfloat16": "E", "nv_bfloat16": "E",
}
# pointee types lab can check an array's dtype against; void* takes any
_POINTEE_TYPES = {**{k: v for k, v in _SCALAR_TYPES.items() if v in "bBhiqfdeE"}, "void": "v"}


def parse_signature(signature):
    """'const float*, float*, int' -> b'*fs*si'-style codes: per parameter '*' (a pointer) or 's' (a
    scalar), then its type letter. A type lab cannot check is a ValueError naming it."""
    if not isinstance(signature, str):
        raise TypeError(f"RawKernel: signature must be a str like 'const float*, int', got {type(signature).__name__}")
    codes = []
    params = [p.strip() for p in signature.split(",")] if signature.strip() else []
    for position, param in enumerate(params):
        text = re.sub(r"\b(const|volatile|__restrict__|restrict)\b", " ", param)
        pointer = text.count("*")
        text = " ".join(text.replace("*", " ").split())
        table = _POINTEE_TYPES if pointer else _SCALAR_TYPES
        if pointer > 1 or text not in table:
            known = "pointers to " + ", ".join(sorted(set(_POINTEE_TYPES))) + "; scalars " + ", ".join(
                sorted(set(_SCALAR_TYPES)))
            raise ValueError(f"RawKernel: signature parameter {position} is {param!r}; lab knows {known}")
        codes.append(("*" if pointer else "s") + table[text])
    return "".join(codes).encode()


class RawModule:
    """CUDA C++ source holding one or more kernels, compiled at first use. `options` go to NVRTC;
    `name_expressions` name template instantiations ('axpy<float>') that get_function can then find
    by that name. lab's kernel headers (functors.cuh, dtype_traits.cuh) are on the include path."""

    def __init__(self, code, *, options=(), name_expressions=()) -> None:
        self.options, self.name_expressions = check_program("RawModule", code, options, name_expressions, "code")
        self.code = code
        self._program: "Program | None" = None
        self._library: object = None
        self._lock = threading.Lock()

    @property
    def program(self) -> "Program":
        """The compiled lab.Program (compiles on first access)."""
        return self._load()[0]

    def _load(self):
        """(the compiled program, its loaded library), compiling and loading on first use."""
        with self._lock:
            if self._program is None:
                program = _compile(self.code, options=self.options, name_expressions=self.name_expressions)
                self._library = _core._library_load(program.binary)
                self._program = program
            return self._program, self._library

    def _lowered_and_sizes(self, name):
        """The kernel's name in the compiled code and its parameters' sizes read from the binary (None
        where it does not say), compiling on first use - no GPU needed to read them."""
        program = self.program
        lowered = program.lowered_names.get(name, name)
        return lowered, parameter_sizes(program, lowered)

    def _kernel_handle(self, name, signature):
        library = self._load()[1]
        lowered, sizes = self._lowered_and_sizes(name)
        kernel, sizes = _core._library_kernel(library, lowered, sizes)
        if sizes is not None and signature is not None and len(sizes) != len(signature) // 2:
            raise ValueError(f"RawKernel {name!r}: the signature has {len(signature) // 2} parameters, "
                             f"the compiled kernel {len(sizes)}")
        return (kernel, name, sizes, signature)

    def get_function(self, name, *, signature=None):
        """The kernel `name` (an extern "C" name, a mangled name, or one of name_expressions) as a
        RawKernel sharing this module's compiled code."""
        return RawKernel._of_module(self, name, signature)


class RawKernel(_core._KernelLauncher):
    """One kernel from CUDA C++ source, compiled at the first call. Call it as CuPy's RawKernel:
    `kernel(grid, block, args, *, shared_mem=0, stream=None)` - grid and block an int or a tuple of
    1 to 3 ints, args a tuple. Arrays from any producer become device pointers; see the module's
    docstring for scalars and `signature` ('const float*, float*, int'), which checks each array's
    dtype and converts each number to its parameter's type before launch. `stream`: as every lab op
    (the argument, `with lab.stream(...)`, else the producer's current stream). The call itself is
    lab.lab._KernelLauncher's, in C; the first one asks _prepare() for the compiled kernel."""

    def __init__(self, code, name, *, options=(), signature=None):
        if not isinstance(name, str):
            raise TypeError(f"RawKernel: name must be a str, got {type(name).__name__}")
        self._init(RawModule(code, options=options), name, signature)

    def _init(self, module, name, signature):
        self.module, self.name = module, name
        self._signature = parse_signature(signature) if signature is not None else None

    @classmethod
    def _of_module(cls, module, name, signature):
        kernel = cls.__new__(cls)
        kernel._init(module, name, signature)
        return kernel

    def _prepare(self):
        """Compile (or find in the cache), load, and look up the kernel: its launch handle."""
        return self.module._kernel_handle(self.name, self._signature)

    def __repr__(self):
        return f"<lab.RawKernel {self.name!r}{' (compiled)' if self._handle is not None else ''}>"
