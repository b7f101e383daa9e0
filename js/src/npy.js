/**
 * Parse a NumPy .npy file (format versions 1-3): little-endian float32, float16 and int8, C order.
 * Returns {dtype, shape, data}; data is a typed array over the file's bytes (copied only when unaligned):
 * Float32Array for '<f4', Uint16Array of raw half floats for '<f2' (see halfToFloat), Int8Array for '|i1'; and the
 * integer arrays of compact storage (uint8, uint16, int32, int64).
 */

const ARRAYS = {
  '<f4': ['float32', Float32Array],
  '<f2': ['float16', Uint16Array],
  '|i1': ['int8', Int8Array],
  '<i1': ['int8', Int8Array],
  '|u1': ['uint8', Uint8Array], // int4 storage: two columns a byte
  '<u2': ['uint16', Uint16Array], // codebook storage: codes
  '<i4': ['int32', Int32Array],
  '<i8': ['int64', BigInt64Array],
};

export class NpyError extends Error {}

export function parseNpy(buffer, name = '.npy file') {
  const bytes = new Uint8Array(buffer);
  const magic = [0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59]; // \x93NUMPY
  if (bytes.length < 10 || magic.some((b, i) => bytes[i] !== b)) {
    throw new NpyError(`${name}: not a .npy file (no \\x93NUMPY magic)`);
  }
  const major = bytes[6];
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const headerLength = major === 1 ? view.getUint16(8, true) : view.getUint32(8, true);
  const start = major === 1 ? 10 : 12;
  const header = new TextDecoder(major === 3 ? 'utf-8' : 'latin1').decode(bytes.subarray(start, start + headerLength));
  const descr = /'descr':\s*'([^']+)'/.exec(header);
  const fortran = /'fortran_order':\s*(True|False)/.exec(header);
  const shape = /'shape':\s*\(([^)]*)\)/.exec(header);
  if (!descr || !fortran || !shape) throw new NpyError(`${name}: unreadable .npy header ${header.trim()}`);
  const kind = ARRAYS[descr[1]];
  if (!kind) {
    throw new NpyError(`${name}: dtype ${descr[1]} is not supported (float32 '<f4', float16 '<f2', int8 '|i1')`);
  }
  if (fortran[1] === 'True') throw new NpyError(`${name}: Fortran-ordered arrays are not supported`);
  const dims = shape[1].split(',').map((s) => s.trim()).filter(Boolean).map(Number);
  const count = dims.reduce((a, b) => a * b, 1);
  const [dtype, ArrayType] = kind;
  const offset = bytes.byteOffset + start + headerLength;
  const needed = count * ArrayType.BYTES_PER_ELEMENT;
  if (bytes.byteLength - start - headerLength < needed) {
    throw new NpyError(`${name}: truncated (${dims.join('x')} ${dtype} needs ${needed} data bytes)`);
  }
  const data = offset % ArrayType.BYTES_PER_ELEMENT === 0
    ? new ArrayType(bytes.buffer, offset, count)
    : new ArrayType(bytes.slice(start + headerLength, start + headerLength + needed).buffer, 0, count);
  return { dtype, shape: dims, data };
}

let HALF_TABLE = null;

/** A Float32Array of all 65,536 IEEE half-precision values, indexed by their bits. */
export function halfToFloat() {
  if (HALF_TABLE) return HALF_TABLE;
  HALF_TABLE = new Float32Array(65536);
  for (let h = 0; h < 65536; h++) {
    const sign = h & 0x8000 ? -1 : 1;
    const exponent = (h >> 10) & 0x1f;
    const fraction = h & 0x3ff;
    let value;
    if (exponent === 0) value = fraction * 2 ** -24;
    else if (exponent === 31) value = fraction ? NaN : Infinity;
    else value = (1 + fraction / 1024) * 2 ** (exponent - 15);
    HALF_TABLE[h] = sign * value;
  }
  return HALF_TABLE;
}
