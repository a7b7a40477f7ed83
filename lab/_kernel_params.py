"""A compiled kernel's parameter sizes, read from what the compiler wrote: the cubin's
EIATTR_KPARAM_INFO records (one per parameter: ordinal, offset, size) or the PTX entry's `.param`
list. RawKernel needs them to marshal arguments; the runtime can tell them too
(cudaFuncGetParamInfo), but only by being asked past the last parameter, which it answers with an
error - one that compute-sanitizer reports against the user's program. Reading the binary asks
nothing. None where the binary does not say (the runtime is asked then)."""
import re
import struct

_KPARAM_INFO = 0x17  # EIATTR_KPARAM_INFO in a cubin's .nv.info.<kernel> section
_FORMAT_SIZES = {1: 2, 2: 2, 3: 2}  # EIFMT_NVAL, BVAL, HVAL: 4-byte records; 4 (SVAL) carries a u16 size


def _sections(binary):
    """{name: bytes} of a little-endian ELF64 file (a cubin), or None if it is not one."""
    if len(binary) < 64 or binary[:4] != b"\x7fELF" or binary[4] != 2 or binary[5] != 1:
        return None
    offset, = struct.unpack_from("<Q", binary, 0x28)
    entry_size, count, names_index = struct.unpack_from("<HHH", binary, 0x3A)
    headers = [struct.unpack_from("<IIQQQQIIQQ", binary, offset + i * entry_size) for i in range(count)]
    names = headers[names_index]

    def name(at):
        start = names[4] + at
        return binary[start:binary.index(b"\0", start)].decode("ascii", "replace")
    return {name(h[0]): binary[h[4]:h[4] + h[5]] for h in headers}


def cubin_parameter_sizes(binary, name):
    """Sizes in bytes by ordinal, from the kernel's EIATTR_KPARAM_INFO records (b'' for none)."""
    sections = _sections(binary)
    info = sections.get(f".nv.info.{name}") if sections else None
    if info is None:
        return None
    sizes, at = {}, 0
    while at + 2 <= len(info):
        form, attribute = info[at], info[at + 1]
        if form == 4:
            length, = struct.unpack_from("<H", info, at + 2)
            payload, at = info[at + 4:at + 4 + length], at + 4 + length
        elif form in _FORMAT_SIZES:
            payload, at = info[at + 2:at + 2 + _FORMAT_SIZES[form]], at + 2 + _FORMAT_SIZES[form]
        else:
            return None  # a record this reader does not know: do not guess past it
        if attribute == _KPARAM_INFO and len(payload) >= 12:
            _, ordinal, _, flags = struct.unpack_from("<IHHI", payload)
            sizes[ordinal] = flags >> 18 & 0x3FFF
    if sorted(sizes) != list(range(len(sizes))):
        return None
    return bytes(min(sizes[i], 255) for i in range(len(sizes)))


_PTX_BYTES = {"8": 1, "16": 2, "32": 4, "64": 8}


def ptx_parameter_sizes(text, name):
    """Sizes in bytes from the PTX entry's `.param` declarations (arrays: their element count)."""
    match = re.search(r"\.entry\s+" + re.escape(name) + r"\s*\((.*?)\)", text, re.S)
    if match is None:
        return None
    sizes = []
    for declaration in filter(str.strip, match.group(1).split(",")):
        kind = re.search(r"\.[bsuf](8|16|32|64)\b", declaration)
        if kind is None:
            return None
        count = re.search(r"\[(\d+)\]\s*$", declaration.strip())
        sizes.append(min(_PTX_BYTES[kind.group(1)] * (int(count.group(1)) if count else 1), 255))
    return bytes(sizes)


def parameter_sizes(program, name):
    """The kernel `name` (its lowered name) of a lab.Program: sizes by parameter, or None."""
    if program.kind == "cubin":
        return cubin_parameter_sizes(program.binary, name)
    return ptx_parameter_sizes(program.binary.decode("utf-8", "replace"), name)
