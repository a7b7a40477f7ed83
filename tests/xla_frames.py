"""XLA's side of an FFI call, built by hand with ctypes (the layout of xla/ffi/api/c_api.h, which
src/binding/xla_ffi_abi.h declares for lab): the API table - errors recorded, the stream 0 - and call
frames of buffers and attributes. tests/test_xla_ffi.py calls lab's handlers with it, and the lessons'
test calls lesson 7's: a handler is a C function of one pointer, so no jax is needed."""
import ctypes

HANDLER = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)


class Extension(ctypes.Structure):
    pass


Extension._fields_ = [("struct_size", ctypes.c_size_t), ("type", ctypes.c_int), ("next", ctypes.POINTER(Extension))]


class ApiVersion(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("extension_start", ctypes.c_void_p),
                ("major_version", ctypes.c_int), ("minor_version", ctypes.c_int)]


class ErrorCreateArgs(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("extension_start", ctypes.c_void_p),
                ("message", ctypes.c_char_p), ("errc", ctypes.c_int)]


class StreamGetArgs(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("extension_start", ctypes.c_void_p),
                ("ctx", ctypes.c_void_p), ("stream", ctypes.c_void_p)]


ERROR_CREATE = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.POINTER(ErrorCreateArgs))
STREAM_GET = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.POINTER(StreamGetArgs))


class Api(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("extension_start", ctypes.c_void_p), ("api_version", ApiVersion),
                ("internal_api", ctypes.c_void_p), ("error_create", ERROR_CREATE), ("error_get_message", ctypes.c_void_p),
                ("error_destroy", ctypes.c_void_p), ("handler_register", ctypes.c_void_p), ("stream_get", STREAM_GET)]


class Buffer(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("extension_start", ctypes.c_void_p), ("dtype", ctypes.c_int),
                ("data", ctypes.c_void_p), ("rank", ctypes.c_int64), ("dims", ctypes.POINTER(ctypes.c_int64))]


class List(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("extension_start", ctypes.c_void_p), ("size", ctypes.c_int64),
                ("types", ctypes.POINTER(ctypes.c_int)), ("items", ctypes.POINTER(ctypes.c_void_p))]


class ByteSpan(ctypes.Structure):
    _fields_ = [("ptr", ctypes.c_char_p), ("len", ctypes.c_size_t)]


class Scalar(ctypes.Structure):
    _fields_ = [("dtype", ctypes.c_int), ("value", ctypes.c_void_p)]


class Attrs(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("extension_start", ctypes.c_void_p), ("size", ctypes.c_int64),
                ("types", ctypes.POINTER(ctypes.c_int)), ("names", ctypes.POINTER(ctypes.POINTER(ByteSpan))),
                ("attrs", ctypes.POINTER(ctypes.c_void_p))]


class CallFrame(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("extension_start", ctypes.POINTER(Extension)),
                ("api", ctypes.POINTER(Api)), ("ctx", ctypes.c_void_p), ("stage", ctypes.c_int), ("args", List),
                ("rets", List), ("attrs", Attrs), ("future", ctypes.c_void_p)]


class Metadata(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("api_version", ApiVersion), ("traits", ctypes.c_uint32)]


class MetadataExtension(ctypes.Structure):
    _fields_ = [("extension_base", Extension), ("metadata", ctypes.POINTER(Metadata))]


F16, BF16, F32, F64, S32, S64, F8 = 10, 16, 11, 12, 4, 5, 19
EXECUTE = 3


class Xla:
    """A stand-in for XLA's side: the API table (errors are recorded, the stream is 0) and frames."""

    def __init__(self, major=0):
        self.errors = []
        self._error_create = ERROR_CREATE(self._record)
        self._stream_get = STREAM_GET(self._stream)
        self.api = Api(struct_size=ctypes.sizeof(Api), api_version=ApiVersion(ctypes.sizeof(ApiVersion), None, major, 3),
                       error_create=self._error_create, stream_get=self._stream_get)
        self.keep = []

    def _record(self, args):
        self.errors.append((args.contents.errc, args.contents.message.decode()))
        return len(self.errors)  # any non-null pointer: XLA's error object

    @staticmethod
    def _stream(args):
        args.contents.stream = None
        return None

    def _list(self, buffers):
        items = []
        for dtype, shape in buffers:
            dims = (ctypes.c_int64 * max(len(shape), 1))(*shape)
            buffer = Buffer(ctypes.sizeof(Buffer), None, dtype, 0x7F0000000000 + 0x100000000 * len(self.keep), len(shape),
                            dims)
            self.keep += [dims, buffer]
            items.append(ctypes.cast(ctypes.pointer(buffer), ctypes.c_void_p))
        types = (ctypes.c_int * max(len(buffers), 1))(*([1] * len(buffers)))
        pointers = (ctypes.c_void_p * max(len(buffers), 1))(*[i.value for i in items])
        self.keep += [types, pointers]
        return List(ctypes.sizeof(List), None, len(buffers), types, pointers)

    def _attrs(self, attributes):
        names, values, types = [], [], []
        for name, (dtype, ctype, value, kind) in attributes.items():
            span = ByteSpan(name.encode(), len(name))
            stored = ctype(value)
            scalar = Scalar(dtype, ctypes.cast(ctypes.pointer(stored), ctypes.c_void_p))
            self.keep += [span, stored, scalar]
            names.append(ctypes.pointer(span))
            values.append(ctypes.cast(ctypes.pointer(scalar), ctypes.c_void_p).value)
            types.append(kind)
        n = max(len(names), 1)
        array_names = (ctypes.POINTER(ByteSpan) * n)(*names)
        array_values = (ctypes.c_void_p * n)(*values)
        array_types = (ctypes.c_int * n)(*types)
        self.keep += [array_names, array_values, array_types]
        return Attrs(ctypes.sizeof(Attrs), None, len(names), array_types, array_names, array_values)

    def frame(self, args, rets, attributes=None, stage=EXECUTE, extension=None):
        """A call frame for these buffers and attributes (kept alive by this object)."""
        frame = CallFrame(ctypes.sizeof(CallFrame), extension, ctypes.pointer(self.api), None, stage,
                          self._list(args), self._list(rets), self._attrs(attributes or {}), None)
        self.keep.append(frame)
        return frame

    @staticmethod
    def target(name):
        """The handler's capsule for a target's name ("elsewhere": lab_kernel off CUDA)."""
        import lab  # here, not at the top: the lessons build frames with this file before lab is built
        return lab.lab._xla_ffi_elsewhere() if name == "elsewhere" else lab.lab._xla_ffi_targets()[name]

    def call(self, target, args, rets, attributes=None, stage=EXECUTE, extension=None):
        frame = self.frame(args, rets, attributes, stage, extension)
        capsule = target if not isinstance(target, str) else self.target(target)
        get = ctypes.pythonapi.PyCapsule_GetPointer
        get.restype, get.argtypes = ctypes.c_void_p, (ctypes.py_object, ctypes.c_char_p)
        result = HANDLER(get(capsule, None))(ctypes.addressof(frame))
        return result, self.errors[-1] if result else None
