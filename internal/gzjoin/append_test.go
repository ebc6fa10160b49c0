package gzjoin

import "encoding/binary"

// Append and Len are the tests' reference: the gzip member of the pieces in
// one buffer, built on its own rather than from Frame, so the tests check
// Frame and Join against it.

// Len returns the length of the gzip stream that Append would produce.
func Len(pieces []Piece) int {
	n := len(gzipHeader) + len(finalBlock) + 8
	for i := range pieces {
		n += len(pieces[i].Deflate)
	}
	return n
}

// Append appends one gzip member holding the pieces' plain bytes in order.
func Append(dst []byte, pieces []Piece) []byte {
	if cap(dst)-len(dst) < Len(pieces) {
		dst = append(make([]byte, 0, len(dst)+Len(pieces)), dst...)
	}
	dst = append(dst, gzipHeader[:]...)
	var crc uint32
	var size int64
	for i := range pieces {
		p := &pieces[i]
		dst = append(dst, p.Deflate...)
		shift := p.shift
		if shift == 0 { // a Piece built by hand; x^n mod P is never 0
			shift = shiftOperator(p.Size)
		}
		crc = combineCRC(crc, p.CRC, shift)
		size += p.Size
	}
	dst = append(dst, finalBlock[:]...)
	dst = binary.LittleEndian.AppendUint32(dst, crc)
	return binary.LittleEndian.AppendUint32(dst, uint32(size)) // ISIZE is the size mod 2^32
}
