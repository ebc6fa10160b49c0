package wire

import (
	"io"

	"github.com/muster-registry/muster/registry"
)

// streamChunk is how much a streaming encoder buffers before it writes.
const streamChunk = 64 << 10

// chunkWriter buffers appended bytes and writes them out in chunks.
type chunkWriter struct {
	w   io.Writer
	b   []byte
	err error
}

func (cw *chunkWriter) flushIfFull() {
	if len(cw.b) >= streamChunk && cw.err == nil {
		_, cw.err = cw.w.Write(cw.b)
		cw.b = cw.b[:0]
	}
}

func (cw *chunkWriter) close() error {
	if cw.err == nil && len(cw.b) > 0 {
		_, cw.err = cw.w.Write(cw.b)
	}
	return cw.err
}

// WriteApplicationsJSON writes the same bytes as AppendApplicationsJSON to
// w, instance by instance, holding only a small buffer: a large registry
// can be compressed as it is encoded, without the whole plain document in
// memory.
func WriteApplicationsJSON(w io.Writer, apps []registry.AppView, versionsDelta, hashcode string) error {
	cw := &chunkWriter{w: w, b: make([]byte, 0, streamChunk+4096)}
	cw.b = append(cw.b, `{"applications":{"versions__delta":`...)
	cw.b = appendJSONString(cw.b, versionsDelta)
	cw.b = append(cw.b, `,"apps__hashcode":`...)
	cw.b = appendJSONString(cw.b, hashcode)
	cw.b = append(cw.b, `,"application":[`...)
	for i, app := range apps {
		if i > 0 {
			cw.b = append(cw.b, ',')
		}
		cw.b = append(cw.b, `{"name":`...)
		cw.b = appendJSONString(cw.b, app.Name)
		cw.b = append(cw.b, `,"instance":[`...)
		first := true
		for _, iv := range app.Instances {
			if iv.Instance == nil {
				continue
			}
			if !first {
				cw.b = append(cw.b, ',')
			}
			first = false
			cw.b = appendInstanceBodyJSON(cw.b, iv)
			cw.flushIfFull()
		}
		cw.b = append(cw.b, "]}"...)
	}
	cw.b = append(cw.b, "]}}"...)
	return cw.close()
}
