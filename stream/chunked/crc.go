package chunked

import "hash/crc32"

// CRC32C arithmetic that lets the append path checksum every payload byte
// once: a batch's checksum covers its base offset, which is assigned only
// when its chunk is cut, long after the payload was copied and checksummed
// at Append. crcCombine joins the two checksums without a second pass.

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// crcPoly is the Castagnoli polynomial, reflected.
const crcPoly = 0x82f63b78

// crcX2n[k] is x^(2^k) modulo the polynomial.
var crcX2n = func() (t [32]uint32) {
	p := uint32(1) << 30 // x^1
	t[0] = p
	for k := 1; k < 32; k++ {
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

// crcCombine returns the CRC32C of A||B from crcA = CRC32C(A),
// crcB = CRC32C(B) and n = len(B): crcA shifted over n bytes, xor crcB.
func crcCombine(crcA, crcB uint32, n int) uint32 {
	shift := uint32(1) << 31 // x^0
	for k := 3; n != 0; n, k = n>>1, k+1 {
		if n&1 != 0 {
			shift = crcMulMod(crcX2n[k&31], shift)
		}
	}
	return crcMulMod(shift, crcA) ^ crcB
}
