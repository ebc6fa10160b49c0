// Package gzjoin builds one standard gzip stream out of pieces that were
// compressed apart, so that a payload made of many parts (one per
// application) is recompressed in proportion to the parts that changed, not
// to the whole.
//
// Each Piece is raw DEFLATE ending in a sync flush (an empty stored block),
// so it ends on a byte boundary and carries no final block; pieces can then
// be laid end to end and closed with one empty final block. The gzip trailer
// needs the CRC-32 of the whole plain text: it is combined from the pieces'
// CRC-32s in GF(2) arithmetic (as zlib's crc32_combine does), which costs a
// few dozen operations a piece, never a pass over the plain bytes.
//
// The result is a single gzip member that compress/gzip, gzip -d and Java's
// GZIPInputStream all read; pieces cannot refer back into each other, which
// costs a little ratio on small pieces and is what makes them reusable.
package gzjoin
