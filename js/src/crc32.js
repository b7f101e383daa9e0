/** CRC-32 (IEEE 802.3, as zlib.crc32) of a byte array, as an unsigned 32-bit integer. */

const TABLE = new Uint32Array(256);
for (let n = 0; n < 256; n++) {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  TABLE[n] = c >>> 0;
}

export function crc32(bytes) {
  return (crc32Update(0xffffffff, bytes) ^ 0xffffffff) >>> 0;
}

/** The running CRC register after `bytes` (start from 0xffffffff; the CRC is the final register ^ 0xffffffff). */
export function crc32Update(register, bytes) {
  let c = register;
  for (let i = 0; i < bytes.length; i++) c = TABLE[(c ^ bytes[i]) & 0xff] ^ (c >>> 8);
  return c;
}
