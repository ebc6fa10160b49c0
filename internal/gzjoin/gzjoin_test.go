package gzjoin

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"os/exec"
	"testing"
)

func TestCombineCRC_matchesDirectChecksum(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 200; i++ {
		a := make([]byte, rng.IntN(3000))
		b := make([]byte, rng.IntN(3000))
		for j := range a {
			a[j] = byte(rng.Uint32())
		}
		for j := range b {
			b[j] = byte(rng.Uint32())
		}
		want := crc32.ChecksumIEEE(append(append([]byte{}, a...), b...))
		got := combineCRC(crc32.ChecksumIEEE(a), crc32.ChecksumIEEE(b), shiftOperator(int64(len(b))))
		if got != want {
			t.Fatalf("len %d+%d: combined %08x, direct %08x", len(a), len(b), got, want)
		}
	}
}

// randomText is JSON-like text, so pieces compress as payloads do.
func randomText(rng *rand.Rand, n int) []byte {
	words := []string{`{"instance":`, `"hostName":"`, `host-`, `","app":"`, `ORDERS`, `"status":"UP"`, `},`, `"port":{"$":8080,"@enabled":"true"}`}
	var b bytes.Buffer
	for b.Len() < n {
		b.WriteString(words[rng.IntN(len(words))])
		fmt.Fprintf(&b, "%d", rng.IntN(100000))
	}
	return b.Bytes()[:n]
}

func joinRandom(t *testing.T, seed uint64) (plain, gz []byte) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 7))
	var pieces []Piece
	for i, n := 0, rng.IntN(40); i < n; i++ {
		size := rng.IntN(20000)
		if rng.IntN(5) == 0 {
			size = 0
		}
		text := randomText(rng, size)
		plain = append(plain, text...)
		if rng.IntN(2) == 0 {
			pieces = append(pieces, Compress(text))
			continue
		}
		w := NewWriterDict(0, nil) // streamed in uneven writes
		for rest := text; len(rest) > 0; {
			k := min(len(rest), 1+rng.IntN(700))
			_, _ = w.Write(rest[:k])
			rest = rest[k:]
		}
		pieces = append(pieces, w.Piece())
	}
	gz = Append(nil, pieces)
	if len(gz) != Len(pieces) {
		t.Fatalf("seed %d: Len %d, Append wrote %d", seed, Len(pieces), len(gz))
	}
	return plain, gz
}

func TestAppend_decodesWithGoGzip(t *testing.T) {
	for seed := uint64(0); seed < 60; seed++ {
		plain, gz := joinRandom(t, seed)
		br := bytes.NewReader(gz) // a ByteReader: the decoder reads no further than the member
		zr, err := gzip.NewReader(br)
		if err != nil {
			t.Fatalf("seed %d: header: %v", seed, err)
		}
		zr.Multistream(false) // one member: a second one would be a bug here
		got, err := io.ReadAll(zr)
		if err != nil {
			t.Fatalf("seed %d: read: %v (checksum and size are checked by the reader)", seed, err)
		}
		if !bytes.Equal(got, plain) {
			t.Fatalf("seed %d: decoded %d bytes, want %d", seed, len(got), len(plain))
		}
		if br.Len() != 0 {
			t.Fatalf("seed %d: %d bytes after the gzip member", seed, br.Len())
		}
	}
}

func TestAppend_corruptedPieceFailsChecksum(t *testing.T) {
	// The trailer really is checked: swapping two pieces keeps the size but
	// must change the CRC the reader computes.
	a, b := Compress([]byte("first piece of text, ")), Compress([]byte("second piece"))
	gz := Append(nil, []Piece{a, b})
	swapped := Append(nil, []Piece{b, a})
	copy(swapped[len(swapped)-8:], gz[len(gz)-8:])
	zr, err := gzip.NewReader(bytes.NewReader(swapped))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadAll(zr); err == nil {
		t.Fatal("a stream with another stream's trailer decoded without a checksum error")
	}
}

func TestAppend_noPiecesIsEmptyGzip(t *testing.T) {
	zr, err := gzip.NewReader(bytes.NewReader(Append(nil, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := io.ReadAll(zr); err != nil || len(got) != 0 {
		t.Fatalf("got %q, %v", got, err)
	}
}

func TestAppend_decodesWithGzipCommand(t *testing.T) {
	path, err := exec.LookPath("gzip")
	if err != nil {
		t.Skip("gzip command not installed: skipping the decode by gzip -d")
	}
	for seed := uint64(100); seed < 110; seed++ {
		plain, gz := joinRandom(t, seed)
		cmd := exec.Command(path, "-d", "-c")
		cmd.Stdin = bytes.NewReader(gz)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("seed %d: gzip -d: %v", seed, err)
		}
		if !bytes.Equal(out, plain) {
			t.Fatalf("seed %d: gzip -d gave %d bytes, want %d", seed, len(out), len(plain))
		}
	}
}

func BenchmarkAppend_1000Pieces(b *testing.B) {
	rng := rand.New(rand.NewPCG(3, 4))
	pieces := make([]Piece, 1000)
	for i := range pieces {
		pieces[i] = Compress(randomText(rng, 6000))
	}
	buf := make([]byte, 0, Len(pieces))
	b.ResetTimer()
	for b.Loop() {
		buf = Append(buf[:0], pieces)
	}
	b.SetBytes(int64(len(buf)))
}

// Join and Frame give the same gzip stream as Append, and it reads back.
func TestJoinAndFrame_matchAppend(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var pieces []Piece
	var plain []byte
	for i := range 9 {
		b := make([]byte, rng.IntN(5000))
		for j := range b {
			b[j] = byte('a' + rng.IntN(4))
		}
		if i == 4 {
			b = nil // an empty piece
		}
		plain = append(plain, b...)
		pieces = append(pieces, Compress(b))
	}
	want := Append(nil, pieces)
	joined := []Piece{pieces[0], Join(pieces[1:5]), Join(pieces[5:])}
	if got := Append(nil, joined); !bytes.Equal(got, want) {
		t.Fatal("Append of joined pieces differs from Append of the pieces")
	}
	h, tr := Frame(joined)
	var framed []byte
	framed = append(framed, h...)
	for _, p := range joined {
		framed = append(framed, p.Deflate...)
	}
	framed = append(framed, tr...)
	if !bytes.Equal(framed, want) {
		t.Fatal("Frame + pieces differs from Append")
	}
	zr, err := gzip.NewReader(bytes.NewReader(framed))
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(zr)
	if err != nil || !bytes.Equal(got, plain) {
		t.Fatalf("read back %d bytes (err %v), want %d", len(got), err, len(plain))
	}
}

// A piece compressed with a dictionary decodes right when it is placed
// after plain bytes ending in that dictionary, and is smaller for it;
// pieces without one, from the same pool of writers, are not affected by
// the dictionary a writer had before.
func TestCompressDict_decodesAfterItsDictionary(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var plain []byte
	var pieces []Piece
	withDict, without := 0, 0
	for i := range 40 {
		text := randomText(rng, 500+rng.IntN(5000))
		if i%2 == 1 && len(plain) > 0 {
			dict := plain[max(len(plain)-rng.IntN(40000), 0):] // longer than the window too
			p := CompressDict(text, dict)
			withDict += len(p.Deflate)
			without += len(Compress(text).Deflate)
			pieces = append(pieces, p)
		} else {
			pieces = append(pieces, Compress(text))
		}
		plain = append(plain, text...)
	}
	zr, err := gzip.NewReader(bytes.NewReader(Append(nil, pieces)))
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(zr)
	if err != nil || !bytes.Equal(got, plain) {
		t.Fatalf("joined pieces with dictionaries: %v, %d bytes, want %d", err, len(got), len(plain))
	}
	if withDict >= without {
		t.Fatalf("pieces with a dictionary %d bytes, without %d: the dictionary did not help", withDict, without)
	}
}
