package stream

import "hash/crc32"

// CRC32C (Castagnoli) is the payload checksum of the contract: drivers,
// transports and callers that supply Batch.PayloadChecksum all use it.

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Checksum is the CRC32C (Castagnoli) of p, the checksum every driver and
// transport uses for payloads.
func Checksum(p []byte) uint32 { return crc32.Checksum(p, castagnoli) }

// UpdateChecksum extends a CRC32C computed so far with p.
func UpdateChecksum(crc uint32, p []byte) uint32 { return crc32.Update(crc, castagnoli, p) }

// copyBlock is how much CopyChecksum copies before it checksums: small
// enough that the checksum reads the copy from the CPU's caches.
const copyBlock = 64 << 10

// CopyChecksum copies src into dst (len(dst) >= len(src)) and returns crc
// extended with the copy, which it checksums a block at a time right after
// copying the block: the bytes are read from memory once, not twice.
func CopyChecksum(crc uint32, dst, src []byte) uint32 {
	for len(src) > 0 {
		n := copy(dst, src[:min(len(src), copyBlock)])
		crc = UpdateChecksum(crc, dst[:n])
		dst, src = dst[n:], src[n:]
	}
	return crc
}

// CombineChecksum returns the CRC32C of A followed by B from crcA =
// Checksum(A), crcB = Checksum(B) and lenB = len(B), without reading A or B:
// crcA shifted over lenB bytes (O(log lenB) carry-less multiplications),
// xor crcB. It lets a checksum that covers bytes written late (a base
// offset, a header) be joined with one computed earlier over the payload,
// so the payload is read once. lenB < 0 is treated as 0.
func CombineChecksum(crcA, crcB uint32, lenB int) uint32 {
	if lenB <= 0 {
		return crcA ^ crcB
	}
	var shift uint32
	if uint64(lenB) < 1<<32 {
		// x^(8 lenB) from one table entry per byte of lenB.
		shift = crcShift[0][lenB&0xff]
		for j := 1; j < 4 && lenB>>(8*j) != 0; j++ {
			shift = crcMulMod(crcShift[j][lenB>>(8*j)&0xff], shift)
		}
	} else {
		shift = uint32(1) << 31 // x^0
		for k := 3; lenB > 0; lenB, k = lenB>>1, k+1 {
			if lenB&1 != 0 {
				shift = crcMulMod(crcX2n[k], shift)
			}
		}
	}
	return crcMulMod(shift, crcA) ^ crcB
}

// crcShift[j][i] is x^(8 i 256^j) modulo the polynomial: shifting a CRC
// over n < 2^32 bytes takes one multiplication per byte of n (4 KiB of
// tables).
var crcShift = func() (t [4][256]uint32) {
	for j := range t {
		t[j][0] = 1 << 31     // x^0
		step := crcX2n[3+8*j] // x^(8 256^j)
		for i := 1; i < 256; i++ {
			t[j][i] = crcMulMod(t[j][i-1], step)
		}
	}
	return t
}()

// crcPoly is the Castagnoli polynomial, reflected.
const crcPoly = 0x82f63b78

// crcX2n[k] is x^(2^k) modulo the polynomial.
var crcX2n = func() (t [67]uint32) {
	p := uint32(1) << 30 // x^1
	t[0] = p
	for k := 1; k < len(t); k++ {
		p = crcMulMod(p, p)
		t[k] = p
	}
	return t
}()

// crcMulMod multiplies a and b modulo the polynomial (reflected bit order).
func crcMulMod(a, b uint32) uint32 {
	var p uint32
	for m := uint32(1) << 31; m != 0; m >>= 1 {
		if a&m != 0 {
			p ^= b
		}
		if b&1 != 0 {
			b = b>>1 ^ crcPoly
		} else {
			b >>= 1
		}
	}
	return p
}
