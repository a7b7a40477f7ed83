"""lab.ElementwiseKernel: an elementwise operation in CuPy's syntax, run on anyone's arrays.

    average = lab.ElementwiseKernel("T x, T y", "T z", "z = (x + y) / 2", "average")
    average(x, y, z)          # x, y, z: torch, CuPy, Numba, JAX arrays or lab.Arrays; z written
    z = average(x, y)         # outputs left out: lab.Arrays of the broadcast shape are allocated

Each parameter is "<type> <name>": the type is a dtype name (float16, bfloat16, float32, float64,
int8, int16, int32, int64, uint8, and for scalars also uint16, uint32, uint64, bool) or a placeholder
(any other identifier, conventionally T) that the arguments decide. An input may be an array or a
number; outputs are arrays. The operation is C++ run once per element of the broadcast shape, with
every parameter by name, `i` the element's index in C order and `_ind.size()` the element count.

The first call with a combination of argument types generates a small CUDA source - an Op struct
holding the operation, and two kernels instantiating kernels/elementwise_kernel.cuh's loops - and
compiles it with lab.compile (cached in memory and on disk). The call itself is C
(src/binding/elementwise_kernel.c): it plans with lab's iterator (broadcasting, any strides, outputs
checked), launches the vectorized kernel when every operand is contiguous and 16-byte aligned and
the strided one otherwise, with the stream policy of every lab op.
"""
import re
import threading

from . import lab as _core
from ._kernel_params import parameter_sizes
from ._nvrtc import check_program
from ._nvrtc import compile as _compile
from ._runtime import DTYPE_NAMES

# dtype name -> (C type, the binding's letter for a scalar of it, byte size, kind: b(ool) u i f)
_TYPES = {
    "float16": ("__half", "e", 2, "f"), "bfloat16": ("__nv_bfloat16", "E", 2, "f"),
    "float32": ("float", "f", 4, "f"), "float64": ("double", "d", 8, "f"),
    "int8": ("signed char", "b", 1, "i"), "int16": ("short", "h", 2, "i"), "int32": ("int", "i", 4, "i"),
    "int64": ("long long", "q", 8, "i"), "uint8": ("unsigned char", "B", 1, "u"),
    "uint16": ("unsigned short", "H", 2, "u"), "uint32": ("unsigned int", "I", 4, "u"),
    "uint64": ("unsigned long long", "Q", 8, "u"), "bool": ("bool", "?", 1, "b"),
}
_DTYPE_OF_LETTER = {letter: name for name, (_, letter, _, _) in _TYPES.items()}
# What the operation computes in: half types in float32, as every lab op (rounded once, on store).
_COMPUTE = {name: "float" if name in ("float16", "bfloat16") else ctype for name, (ctype, *_) in _TYPES.items()}
# lab's array dtypes, in the order of lab_dtype (src/kernels/launch.h): an array's key byte is '0' + it
_ARRAY_DTYPES = DTYPE_NAMES
_KIND_ORDER = "buif"
_IDENTIFIER = re.compile(r"[A-Za-z_]\w*\Z")
_RESERVED = {"i", "_ind", "Op", "lab"}  # and names starting lab_: the generated kernels' own
_CONTROL_FLOW = re.compile(r"\b(if|else|for|while|do|switch|case|return|goto|break|continue)\b")


def _same_kind(source, target):
    """NumPy's casting='same_kind' between two of _TYPES: never to a lower kind (float -> int)."""
    return _KIND_ORDER.index(_TYPES[source][3]) <= _KIND_ORDER.index(_TYPES[target][3])


class _Param:
    __slots__ = ("name", "type", "is_output")

    def __init__(self, text, is_output, who):
        words = text.split()
        if len(words) == 3 and words[0] == "raw":
            raise ValueError(f"{who}: parameter {text!r}: raw parameters (indexed by the kernel itself) are not "
                             "supported; write such a kernel with lab.RawKernel")
        if len(words) != 2 or not all(_IDENTIFIER.match(w) for w in words):
            raise ValueError(f"{who}: parameter {text!r} must be '<type> <name>', e.g. 'float32 x' or 'T x'")
        self.type, self.name = words
        self.is_output = is_output
        if self.name in _RESERVED or self.name.startswith("lab_"):
            raise ValueError(f"{who}: parameter name {self.name!r} is reserved (the generated code uses it)")

    @property
    def placeholder(self):
        return self.type not in _TYPES


def _parse_params(text, is_output, who, what):
    if not isinstance(text, str):
        raise TypeError(f"{who}: {what} must be a str like 'float32 x, T y', got {type(text).__name__}")
    return [_Param(part.strip(), is_output, who) for part in text.split(",")] if text.strip() else []


def _code_only(operation):
    """The operation without comments and string or character literals, for the scans below."""
    return re.sub(r'//[^\n]*|/\*.*?\*/|"(\\.|[^"\\])*"|\'(\\.|[^\'\\])*\'', " ", operation, flags=re.S)


def _assigned_only(code, name):
    """Whether the operation only assigns `name`, as whole statements (`name = ...;` at a
    statement's start) and with no control flow: then every element's output is written and its
    old value never read, so the kernel need not load it. Otherwise (`z += x`, `f(z)`,
    `if (c) z = x;`) the output is loaded first, so what the operation leaves keeps its value."""
    if _CONTROL_FLOW.search(code):
        return False
    uses = list(re.finditer(rf"(?<![\w.>:]){re.escape(name)}\b", code))
    for use in uses:
        before = code[:use.start()].rstrip()
        after = code[use.end():].lstrip()
        statement_start = not before or before[-1] in ";{}"
        if not (statement_start and after.startswith("=") and not after.startswith("==")):
            return False
    return bool(uses)


class ElementwiseKernel(_core._ElementwiseLauncher):
    """An elementwise kernel from CuPy's ElementwiseKernel syntax; see the module's docstring.

    `in_params`, `out_params`: "float32 x, T y" (inputs: arrays or numbers; outputs: arrays).
    `operation`: C++ for one element. `name`: the kernel's name (an identifier). `preamble`: C++
    placed before the kernel (helper functions). `options`: NVRTC options.
    Call it as `kernel(*inputs, *outputs, stream=None)`; it returns the output (a tuple of them for
    several). Left out, the outputs are allocated as lab.Arrays of the broadcast shape."""

    def __init__(self, in_params, out_params, operation, name="kernel", *, preamble="", options=()):
        who = f"ElementwiseKernel {name!r}"
        if not isinstance(name, str) or not _IDENTIFIER.match(name):
            raise ValueError(f"ElementwiseKernel: name must be a C identifier, got {name!r}")
        if not isinstance(preamble, str):
            raise TypeError(f"{who}: preamble must be a str of C++, got {type(preamble).__name__}")
        self.options = check_program(who, operation, options, (), "operation")[0]
        self.inputs = _parse_params(in_params, False, who, "in_params")
        self.outputs = _parse_params(out_params, True, who, "out_params")
        if not self.outputs:
            raise ValueError(f"{who}: out_params must name at least one output")
        names = [p.name for p in self.inputs + self.outputs]
        if len(set(names)) != len(names):
            raise ValueError(f"{who}: parameter names must differ, got {', '.join(names)}")
        self.name, self.operation, self.preamble = name, operation, preamble
        code = _code_only(operation)
        self.uses_index = re.search(r"(?<![\w.>:])i\b", code) is not None
        self.loaded_outputs = {p.name for p in self.outputs if not _assigned_only(code, p.name)}
        self._lock = threading.Lock()
        self._setup(name, tuple(p.name for p in self.inputs), tuple(p.name for p in self.outputs))

    # ---- types: from one call's argument key to every parameter's type ----

    def _resolve(self, key):
        """{placeholder: dtype name} and each parameter's (storage dtype or None for a number,
        parameter type), from the argument key: one byte an argument, '0' + lab_dtype for an array,
        a scalar's letter for a number. TypeError where the arguments disagree."""
        params = self.inputs + self.outputs
        kinds = [chr(b) for b in key]  # '-': an output to allocate, its type the parameter's
        found = [(_ARRAY_DTYPES[ord(k) - ord("0")], True) if k.isdigit() else (None, True) if k == "-"
                 else (_DTYPE_OF_LETTER[k], False) for k in kinds]
        bound = {}
        for array_pass in (True, False):  # arrays decide a placeholder first, numbers only where none did
            for param, (dtype, is_array) in zip(params, found):
                if not param.placeholder or is_array != array_pass or dtype is None:
                    continue
                if param.type not in bound:
                    bound[param.type] = dtype
                elif is_array and bound[param.type] != dtype:
                    raise TypeError(f"{self.name}(): argument '{param.name}' has dtype {dtype} but another "
                                    f"argument already made {param.type} {bound[param.type]}")
        resolved = []
        for param, (dtype, is_array) in zip(params, found):
            ptype = bound.get(param.type, param.type)
            if ptype not in _TYPES:
                raise TypeError(f"{self.name}(): no argument decides {param.type} (the type of '{param.name}'); "
                                "pass an array for it")
            if dtype is None:  # an output to allocate
                resolved.append((ptype, ptype))
                continue
            if param.is_output and not is_array:
                raise TypeError(f"{self.name}(): output '{param.name}' must be an array, got a number")
            if is_array and param.is_output and not _same_kind(ptype, dtype):
                raise TypeError(f"{self.name}(): output '{param.name}' has dtype {dtype}; the kernel writes "
                                f"{ptype} there, which only casts to the same kind or higher")
            if is_array and not param.is_output and not _same_kind(dtype, ptype):
                raise TypeError(f"{self.name}(): argument '{param.name}' has dtype {dtype}; the parameter "
                                f"is {ptype}, which an array only casts to from the same kind or lower")
            resolved.append((dtype if is_array else None, ptype))
        return bound, resolved

    def _source(self, bound, resolved):
        """The CUDA source for one specialization: the Op and its two kernels."""
        params = self.inputs + self.outputs
        arrays = [(p, storage, ptype) for p, (storage, ptype) in zip(params, resolved) if storage is not None]
        ordered = [a for a in arrays if a[0].is_output] + [a for a in arrays if not a[0].is_output]
        scalars = [(p, ptype) for p, (storage, ptype) in zip(params, resolved) if storage is None]
        pointers = len(ordered) + self.uses_index

        def role(p):
            if not p.is_output:
                return "lab::jit::kInput"
            return "lab::jit::kOutputLoaded" if p.name in self.loaded_outputs else "lab::jit::kOutput"

        operands = ", ".join(f"lab::jit::Operand<{_TYPES[s][0]}, {_COMPUTE[t]}, {role(p)}>" for p, s, t in ordered)
        arguments = ", ".join(f"{'' if p.is_output else 'const '}{_COMPUTE[t]} &{p.name}" for p, _, t in ordered)
        scalar_params = "".join(f", {_COMPUTE[t]} {p.name}" for p, t in scalars)
        scalar_names = ", ".join(p.name for p, _ in scalars)
        lines = ['#include "elementwise_kernel.cuh"', "", self.preamble, "", "namespace {", "struct Op {"]
        lines += [f"    using {placeholder} = {_COMPUTE[dtype]};" for placeholder, dtype in bound.items()]
        lines += [f"    using Operands = lab::jit::Operands<{operands}>;",
                  f"    static constexpr bool kUsesIndex = {'true' if self.uses_index else 'false'};"]
        lines += [f"    {_COMPUTE[t]} {p.name};" for p, t in scalars]
        lines += [f"    __device__ __forceinline__ void operator()({arguments}, const long long i,",
                  "                                               const lab::jit::Indexer &_ind) const {",
                  f'#line 1 "{self.name}: operation"', self.operation, ";", "    }", "};", "} // namespace", ""]
        for path, layout in (("vectorized", ""), ("strided", f", lab::StridedLayout<{pointers}> lab_layout")):
            lines += ['extern "C" __global__ void __launch_bounds__(lab::jit::kThreads)',
                      f"    {self.name}_{path}(lab::jit::Pointers<{pointers}> lab_pointers{layout}, long long lab_count"
                      f"{scalar_params}) {{",
                      f"    lab::jit::{path}(Op{{{scalar_names}}}, lab_pointers{', lab_layout' if layout else ''}, "
                      "lab_count);", "}"]
        vector = 16 // min(_TYPES[s][2] for _, s, _ in ordered)
        return "\n".join(lines) + "\n", vector

    def source(self, *types):
        """The CUDA source lab generates for arguments of these types (dtype names for arrays,
        'int', 'float', 'bool' or a dtype name with 'scalar:' before it for numbers), to read."""
        return self._source(*self._resolve(self._key_of(types)))[0]

    @staticmethod
    def _key_of(types):
        letters = {"int": "q", "float": "d", "bool": "?"}
        key = []
        for t in types:
            if t in letters:
                key.append(letters[t])
            elif isinstance(t, str) and t.startswith("scalar:") and t[7:] in _TYPES:
                key.append(_TYPES[t[7:]][1])
            elif t in _ARRAY_DTYPES:
                key.append(str(_ARRAY_DTYPES.index(t)))
            else:
                raise ValueError(f"source(): {t!r} is not an array dtype, 'int', 'float', 'bool' or 'scalar:<dtype>'")
        return "".join(key).encode()

    def _specialize(self, key):
        """The handle the C call wants for this key: the kernels compiled and loaded, which inputs are
        numbers (and their C type letters), whether the operation uses `i`, the vector width."""
        if len(key) != len(self.inputs) + len(self.outputs):
            raise TypeError(f"{self.name}(): expected {len(self.inputs) + len(self.outputs)} arguments")
        bound, resolved = self._resolve(key)
        source, vector = self._source(bound, resolved)
        with self._lock:
            program = _compile(source, options=self.options)
            library = _core._library_load(program.binary)
        vectorized, strided = (_core._library_kernel(library, name, parameter_sizes(program, name))[0]
                               for name in (f"{self.name}_vectorized", f"{self.name}_strided"))
        return (vectorized, strided, self._input_letters(resolved), self.uses_index, vector)

    def _input_letters(self, resolved):
        """One byte an input: '*' for an array, else the C type letter its number converts to (the
        parameter's, float for a half type, which the kernel takes in float)."""
        return bytes(ord("*") if storage is not None else ord("f" if _COMPUTE[ptype] == "float" else _TYPES[ptype][1])
                     for storage, ptype in resolved[:len(self.inputs)])

    def _call_allocating(self, inputs, stream):
        """The call with the outputs left out: lab.Arrays of the inputs' broadcast shape, of the
        outputs' types, on the inputs' device."""
        shapes, device, key = [], None, []
        for param, value in zip(self.inputs, inputs):
            if hasattr(type(value), "__dlpack_c_exchange_api__") or hasattr(value, "__cuda_array_interface__") \
                    or isinstance(value, _core.Array):
                info = _core._array_info(value)
                shapes.append(tuple(info["shape"]))
                device = info["device"] if device is None or device < 0 else device
                key.append(str(_ARRAY_DTYPES.index(info["dtype"])))
            else:
                key.append({bool: "?", int: "q", float: "d"}.get(type(value)) or self._number_letter(param, value))
        dtypes = [ptype for _, ptype in self._resolve(("".join(key) + "-" * len(self.outputs)).encode())[1]]
        shape = _broadcast(shapes, self.name)
        outputs = []
        for param, ptype in zip(self.outputs, dtypes[len(self.inputs):]):
            if ptype not in _ARRAY_DTYPES:
                raise TypeError(f"{self.name}(): output '{param.name}' would be {ptype}, which lab cannot allocate; "
                                "pass the output")
            outputs.append(_core.empty(shape, ptype, device=None if device is None or device < 0 else device,
                                       stream=stream))
        return self(*inputs, *outputs, stream=stream)

    def _number_letter(self, param, value):
        import numpy as np

        dtype = np.asarray(value).dtype if isinstance(value, np.generic) else None
        if dtype is None or dtype.name not in _TYPES:
            raise TypeError(f"{self.name}(): argument '{param.name}' is a {type(value).__name__}; inputs are CUDA "
                            "arrays or numbers (int, float, bool, NumPy scalars)")
        return _TYPES[dtype.name][1]

    def __repr__(self):
        inputs = ", ".join(f"{p.type} {p.name}" for p in self.inputs)
        outputs = ", ".join(f"{p.type} {p.name}" for p in self.outputs)
        return f"<lab.ElementwiseKernel {self.name!r} ({inputs}) -> ({outputs})>"


def _broadcast(shapes, name):
    """NumPy's broadcast of the array inputs' shapes; () when every input is a number."""
    ndim = max((len(s) for s in shapes), default=0)
    out = [1] * ndim
    for s in shapes:
        for d, size in enumerate(s, ndim - len(s)):
            if size != 1 and out[d] not in (1, size):
                raise ValueError(f"{name}(): the inputs cannot be broadcast together: shapes {shapes}")
            out[d] = size if size != 1 else out[d]
    return tuple(out)
