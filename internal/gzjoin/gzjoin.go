package gzjoin

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"io"
	"sync"

	"github.com/klauspost/compress/flate"
)

// Piece is one part of a gzip stream, compressed on its own.
type Piece struct {
	// Deflate is raw DEFLATE data ending in a sync flush, without a final
	// block.
	Deflate []byte
	// CRC is the IEEE CRC-32 of the plain bytes.
	CRC uint32
	// Size is the number of plain bytes.
	Size int64
	// shift is shiftOperator(Size), kept so joining costs one
	// multiplication a piece.
	shift uint32
}

// gzipHeader is a gzip member header: deflate, no flags, no mtime, no extra
// flags, OS unknown (as compress/gzip writes it).
var gzipHeader = [10]byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff}

// finalBlock is an empty fixed-Huffman block with BFINAL set: what zlib
// writes for Z_FINISH with no input left.
var finalBlock = [2]byte{0x03, 0x00}

// Level is the compression level of pieces. A piece is compressed once per
// change of its part, and the rebuild after a change is what a waiting
// reader feels. With a dictionary (CompressDict), level 6 brings a
// Spring-shaped registry below the Java server's bytes (docs/performance.md;
// level 4 is about even with them, level 1 well above) at ~240 µs for a
// 50-instance app (level 5: 200 µs and 1–2% more bytes; level 9: 4× the
// time for 5% fewer).
const Level = 6

var flateWriters = sync.Pool{New: func() any {
	w, _ := flate.NewWriter(io.Discard, Level)
	return w
}}

// Writer compresses one piece as it is written, so the plain text never
// has to exist whole.
type Writer struct {
	buf  bytes.Buffer
	fw   *flate.Writer
	crc  uint32
	size int64
}

// NewWriterDict returns a Writer for one piece; sizeHint is the expected
// compressed size, 0 if unknown. dict, if any, is the plain bytes the
// piece will be placed right after: back-references may reach into dict, so the
// piece decodes correctly only there (a piece's DEFLATE refers to what the
// decoder wrote before it, whatever piece that came from). Only the last
// 32 KiB of dict matter.
func NewWriterDict(sizeHint int, dict []byte) *Writer {
	w := &Writer{fw: flateWriters.Get().(*flate.Writer)}
	w.buf.Grow(sizeHint)
	if len(dict) > maxDict {
		dict = dict[len(dict)-maxDict:]
	}
	// ResetDict, never Reset: a pooled writer's Reset would refill the
	// window from the dictionary of its last use.
	w.fw.ResetDict(&w.buf, dict)
	return w
}

// maxDict is DEFLATE's window: no back-reference reaches further.
const maxDict = 32 << 10

// Write adds plain bytes to the piece. It never fails.
func (w *Writer) Write(p []byte) (int, error) {
	w.crc = crc32.Update(w.crc, crc32.IEEETable, p)
	w.size += int64(len(p))
	return w.fw.Write(p)
}

// Piece ends the piece with a sync flush and returns it; the Writer must
// not be used afterwards.
func (w *Writer) Piece() Piece {
	_ = w.fw.Flush() // writes to a bytes.Buffer: cannot fail
	flateWriters.Put(w.fw)
	w.fw = nil
	return Piece{Deflate: bytes.Clone(w.buf.Bytes()), CRC: w.crc, Size: w.size, shift: shiftOperator(w.size)}
}

// Compress returns plain as one piece.
func Compress(plain []byte) Piece {
	return CompressDict(plain, nil)
}

// CompressDict returns plain as one piece that may only follow plain bytes
// ending in dict (see NewWriterDict).
func CompressDict(plain, dict []byte) Piece {
	w := NewWriterDict(len(plain)/4+64, dict)
	_, _ = w.Write(plain)
	return w.Piece()
}

// Join returns the pieces as one piece: their DEFLATE laid end to end (one
// copy) and their CRC-32s combined. A payload of many small pieces can so
// be kept as a few large ones, rejoined only where a piece changed.
func Join(pieces []Piece) Piece {
	n := 0
	for i := range pieces {
		n += len(pieces[i].Deflate)
	}
	out := Piece{Deflate: make([]byte, 0, n)}
	for i := range pieces {
		p := &pieces[i]
		out.Deflate = append(out.Deflate, p.Deflate...)
		out.CRC = combineCRC(out.CRC, p.CRC, p.shiftOp())
		out.Size += p.Size
	}
	out.shift = shiftOperator(out.Size)
	return out
}

// Frame returns what goes around the pieces' DEFLATE: the gzip header and
// the end (final block, CRC-32, size). header, each piece's Deflate, then
// trailer, written in that order, are one gzip member holding the pieces'
// plain bytes in order, without copying the pieces into one buffer.
func Frame(pieces []Piece) (header, trailer []byte) {
	var crc uint32
	var size int64
	for i := range pieces {
		p := &pieces[i]
		crc = combineCRC(crc, p.CRC, p.shiftOp())
		size += p.Size
	}
	trailer = make([]byte, 0, len(finalBlock)+8)
	trailer = append(trailer, finalBlock[:]...)
	trailer = binary.LittleEndian.AppendUint32(trailer, crc)
	trailer = binary.LittleEndian.AppendUint32(trailer, uint32(size))
	return gzipHeader[:], trailer
}

func (p *Piece) shiftOp() uint32 {
	if p.shift == 0 { // a Piece built by hand; x^n mod P is never 0
		return shiftOperator(p.Size)
	}
	return p.shift
}
