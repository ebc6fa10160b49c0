package gzjoin

// crcPoly is the reflected IEEE polynomial of hash/crc32.
const crcPoly = 0xedb88320

// multModP multiplies a and b modulo the CRC polynomial, in the reflected
// bit order CRC-32 uses (x^0 is the top bit).
func multModP(a, b uint32) uint32 {
	m := uint32(1) << 31
	var p uint32
	for {
		if a&m != 0 {
			p ^= b
			if a&(m-1) == 0 {
				return p
			}
		}
		m >>= 1
		if b&1 != 0 {
			b = b>>1 ^ crcPoly
		} else {
			b >>= 1
		}
	}
}

// x2nTable[k] is x^(2^k) modulo the polynomial.
var x2nTable = func() (t [32]uint32) {
	p := uint32(1) << 30 // x^1
	t[0] = p
	for k := 1; k < 32; k++ {
		p = multModP(p, p)
		t[k] = p
	}
	return t
}()

// shiftOperator returns x^(8·n) modulo the polynomial: multiplying a CRC by
// it appends n zero bytes to the text it covers.
func shiftOperator(n int64) uint32 {
	p := uint32(1) << 31 // x^0
	for k := 3; n > 0; n, k = n>>1, k+1 {
		if n&1 != 0 {
			p = multModP(x2nTable[k&31], p)
		}
	}
	return p
}

// combineCRC returns the CRC-32 of A‖B from crcA, crcB and B's shift
// operator (shiftOperator(len(B))).
func combineCRC(crcA, crcB, shiftB uint32) uint32 {
	return multModP(shiftB, crcA) ^ crcB
}
